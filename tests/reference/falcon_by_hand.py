"""Falcon's forward written out from its Hugging Face layer (FalconDecoderLayer, FalconAttention's
_split_heads), float64, to check the generic reference (families.py) on what Falcon adds: its
query_key_value split as Hugging Face splits it (multi-query: the q heads, then one k and one v
head; the new decoder architecture: per kv group, the group's q heads, then its k and its v),
both branches added to the block's input (parallel_attn), read from one LayerNorm (7B) or from
ln_attn and ln_mlp (new decoder architecture), linears without biases, exact GELU, RoPE over
whole heads, a tied head. Shares nothing with the engine; imported by families_checks.py.
"""
import math

import torch.nn.functional as F

from by_hand import as64, causal, cos_sin, ln as _ln, matches as _matches, repeat_kv, rotate


def _split_heads(fused, heads, kv_heads, d, new_arch):
    """q [B, heads, S, d], k and v [B, kv_heads, S, d] from query_key_value's output."""
    B, S, _ = fused.shape
    if new_arch:
        g = fused.view(B, S, kv_heads, heads // kv_heads + 2, d)
        q, k, v = g[:, :, :, :-2], g[:, :, :, [-2]], g[:, :, :, [-1]]
        q = q.reshape(B, S, heads, d)
        k = k.reshape(B, S, kv_heads, d)
        v = v.reshape(B, S, kv_heads, d)
    else:  # multi-query
        g = fused.view(B, S, heads + 2, d)
        q, k, v = g[:, :, :-2], g[:, :, [-2]], g[:, :, [-1]]
    return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)


def loss(f, w, win, new_arch):
    """Mean cross-entropy of windows [B, S + 1] under the Falcon config's features `f`."""
    w = as64(w)
    idx = win[:, :-1]
    B, S = idx.shape
    a, kv, d, eps = f["heads"], f["kv_heads"], f["head_dim"], f["norm_eps"]
    cos, sin = cos_sin(f["rope_theta"], d, S)
    mask = causal(S)
    x = w["transformer.word_embeddings.weight"][idx]
    for l in range(f["layers"]):
        p = "transformer.h.%d." % l
        if new_arch:
            y = _ln(x, w[p + "ln_attn.weight"], w[p + "ln_attn.bias"], eps)
            z = _ln(x, w[p + "ln_mlp.weight"], w[p + "ln_mlp.bias"], eps)
        else:
            y = z = _ln(x, w[p + "input_layernorm.weight"], w[p + "input_layernorm.bias"], eps)
        q, k, v = _split_heads(y @ w[p + "self_attention.query_key_value.weight"].t(), a, kv, d, new_arch)
        q, k, v = rotate(q, cos, sin), repeat_kv(rotate(k, cos, sin), a), repeat_kv(v, a)
        probs = (q @ k.transpose(-1, -2) / math.sqrt(d) + mask).softmax(-1)
        attn = (probs @ v).transpose(1, 2).reshape(B, S, a * d) @ w[p + "self_attention.dense.weight"].t()
        mlp = F.gelu(z @ w[p + "mlp.dense_h_to_4h.weight"].t()) @ w[p + "mlp.dense_4h_to_h.weight"].t()
        x = (mlp + attn) + x
    x = _ln(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    logits = x @ w["transformer.word_embeddings.weight"].t()
    return F.cross_entropy(logits.reshape(-1, f["vocab"]), win[:, 1:].reshape(-1)).item()


def matches(f, w, win, generic_loss, new_arch):
    """True when the generic reference's loss equals this one's to 1e-12."""
    return _matches(loss(f, w, win, new_arch), generic_loss, f, w, win)
