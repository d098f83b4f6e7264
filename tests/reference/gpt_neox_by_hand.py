"""GPT-NeoX's forward written out from its Hugging Face layer (GPTNeoXLayer with
use_parallel_residual, GPTNeoXAttention), float64, to check the generic reference (families.py)
on what GPT-NeoX adds: query_key_value fused per head (its rows are [q, k, v] of head 0, then of
head 1, ...), RoPE on the first rotary_pct of each head's dims only (the halves of that part
rotated), LayerNorms and linears with biases, exact GELU, and the parallel block
x + attn(ln1(x)) + mlp(ln2(x)). Shares nothing with the engine; imported by families_checks.py.
"""
import math

import torch
import torch.nn.functional as F

from by_hand import as64, causal, cos_sin, ln as _ln, matches as _matches, rotate


def loss(f, w, win):
    """Mean cross-entropy of windows [B, S + 1] under the GPT-NeoX config's features `f`."""
    w = as64(w)
    idx = win[:, :-1]
    B, S = idx.shape
    a, d, eps = f["heads"], f["head_dim"], f["norm_eps"]
    rd = int(d * f["partial_rotary_factor"])
    cos, sin = cos_sin(f["rope_theta"], rd, S)
    mask = causal(S)
    x = w["gpt_neox.embed_in.weight"][idx]
    for l in range(f["layers"]):
        p = "gpt_neox.layers.%d." % l
        y = _ln(x, w[p + "input_layernorm.weight"], w[p + "input_layernorm.bias"], eps)
        qkv = y @ w[p + "attention.query_key_value.weight"].t() + w[p + "attention.query_key_value.bias"]
        qkv = qkv.view(B, S, a, 3 * d).permute(0, 2, 1, 3)  # [B, heads, S, 3d]: per head q, k, v
        q, k, v = qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:]
        q = torch.cat((rotate(q[..., :rd], cos, sin), q[..., rd:]), -1)
        k = torch.cat((rotate(k[..., :rd], cos, sin), k[..., rd:]), -1)
        probs = (q @ k.transpose(-1, -2) / math.sqrt(d) + mask).softmax(-1)
        attn = (probs @ v).transpose(1, 2).reshape(B, S, a * d) @ w[p + "attention.dense.weight"].t() \
            + w[p + "attention.dense.bias"]
        z = _ln(x, w[p + "post_attention_layernorm.weight"], w[p + "post_attention_layernorm.bias"], eps)
        hmid = F.gelu(z @ w[p + "mlp.dense_h_to_4h.weight"].t() + w[p + "mlp.dense_h_to_4h.bias"])
        mlp = hmid @ w[p + "mlp.dense_4h_to_h.weight"].t() + w[p + "mlp.dense_4h_to_h.bias"]
        x = mlp + attn + x
    x = _ln(x, w["gpt_neox.final_layer_norm.weight"], w["gpt_neox.final_layer_norm.bias"], eps)
    logits = x @ w["embed_out.weight"].t()
    return F.cross_entropy(logits.reshape(-1, f["vocab"]), win[:, 1:].reshape(-1)).item()


def matches(f, w, win, generic_loss):
    """True when the generic reference's loss equals this one's to 1e-12."""
    return _matches(loss(f, w, win), generic_loss, f, w, win)
