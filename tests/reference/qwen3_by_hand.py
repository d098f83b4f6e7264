"""Qwen3's forward written out from its Hugging Face decoder layer (Qwen3DecoderLayer), float64,
to check the generic reference (families.py) on the feature Qwen3 adds: q_norm and k_norm are
RMSNorms over each head's head_dim (one weight of head_dim for every q head, one for every k
head), applied after the projections are split into heads and before RoPE. Pre-norm blocks,
no biases, SwiGLU, grouped-query attention, head_dim independent of hidden / heads, a tied head.
Shares nothing with the engine; imported by families_checks.py.
"""
import math

import torch.nn.functional as F

from by_hand import as64, causal, cos_sin, matches as _matches, repeat_kv, rms as _rms, rotate


def loss(f, w, win):
    """Mean cross-entropy of windows [B, S + 1] under the Qwen3 config's features `f` (sizes,
    eps, theta, tied head) and Hugging Face-named weights `w`."""
    w = as64(w)
    idx = win[:, :-1]
    B, S = idx.shape
    a, kv, d, eps = f["heads"], f["kv_heads"], f["head_dim"], f["norm_eps"]
    cos, sin = cos_sin(f["rope_theta"], d, S)
    mask = causal(S)
    x = w["model.embed_tokens.weight"][idx]
    for l in range(f["layers"]):
        p = "model.layers.%d." % l
        at = p + "self_attn."
        y = _rms(x, w[p + "input_layernorm.weight"], eps)
        q = _rms((y @ w[at + "q_proj.weight"].t()).view(B, S, a, d), w[at + "q_norm.weight"], eps).transpose(1, 2)
        k = _rms((y @ w[at + "k_proj.weight"].t()).view(B, S, kv, d), w[at + "k_norm.weight"], eps).transpose(1, 2)
        v = (y @ w[at + "v_proj.weight"].t()).view(B, S, kv, d).transpose(1, 2)
        q, k, v = rotate(q, cos, sin), repeat_kv(rotate(k, cos, sin), a), repeat_kv(v, a)
        probs = (q @ k.transpose(-1, -2) / math.sqrt(d) + mask).softmax(-1)
        x = x + (probs @ v).transpose(1, 2).reshape(B, S, a * d) @ w[at + "o_proj.weight"].t()
        y = _rms(x, w[p + "post_attention_layernorm.weight"], eps)
        m = p + "mlp."
        act = F.silu(y @ w[m + "gate_proj.weight"].t()) * (y @ w[m + "up_proj.weight"].t())
        x = x + act @ w[m + "down_proj.weight"].t()
    head = w["model.embed_tokens.weight"] if f["tied_embeddings"] else w["lm_head.weight"]
    logits = _rms(x, w["model.norm.weight"], eps) @ head.t()
    return F.cross_entropy(logits.reshape(-1, f["vocab"]), win[:, 1:].reshape(-1)).item()


def matches(f, w, win, generic_loss):
    """True when the generic reference's loss equals this one's to 1e-12."""
    return _matches(loss(f, w, win), generic_loss, f, w, win)
