"""Gemma 3's text forward written out from its Hugging Face decoder layer (Gemma3DecoderLayer,
Gemma3Attention, Gemma3TextScaledWordEmbedding), float64, to check the generic reference
(families.py) on what Gemma 3 adds to Gemma 2: q_norm and k_norm over each head's head_dim with
(1 + w) weights, before RoPE; sliding_window_pattern (every pattern-th layer global, the others
windowed) or transformers 5's layer_types; the windowed layers' RoPE on rope_local_base_freq without scaling, the global layers'
on rope_theta with linear rope_scaling; no soft-caps. Shares nothing with the engine; imported by
families_checks.py.
"""
import math

import torch
import torch.nn.functional as F

from by_hand import DT, as64, cos_sin, matches as _matches, repeat_kv, rms1 as _rms1, rotate


def loss(c, w, win):
    """Mean cross-entropy of windows [B, S + 1] under the gemma3_text config.json `c` itself."""
    w = as64(w)
    idx = win[:, :-1]
    B, S = idx.shape
    a, kv, d, eps = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], c["rms_norm_eps"]
    scaling = c.get("rope_scaling") or {}
    glob = cos_sin(c["rope_theta"], d, S, scaling.get("factor", 1.0) if scaling.get("rope_type") == "linear" else 1.0)
    local = cos_sin(c["rope_local_base_freq"], d, S)
    i, j = torch.arange(S)[:, None], torch.arange(S)[None, :]
    x = w["model.embed_tokens.weight"][idx] * torch.tensor(math.sqrt(c["hidden_size"]), dtype=torch.float32).to(DT)
    for l in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % l
        at = p + "self_attn."
        if "layer_types" in c:
            sliding = c["layer_types"][l] == "sliding_attention"
        else:
            sliding = (l + 1) % c["sliding_window_pattern"] != 0
        cos, sin = local if sliding else glob
        y = _rms1(x, w[p + "input_layernorm.weight"], eps)
        q = _rms1((y @ w[at + "q_proj.weight"].t()).view(B, S, a, d), w[at + "q_norm.weight"], eps).transpose(1, 2)
        k = _rms1((y @ w[at + "k_proj.weight"].t()).view(B, S, kv, d), w[at + "k_norm.weight"], eps).transpose(1, 2)
        v = (y @ w[at + "v_proj.weight"].t()).view(B, S, kv, d).transpose(1, 2)
        q, k, v = rotate(q, cos, sin), repeat_kv(rotate(k, cos, sin), a), repeat_kv(v, a)
        allowed = (j <= i) & ((i - j < c["sliding_window"]) if sliding else torch.ones(S, S, dtype=torch.bool))
        scores = (q @ k.transpose(-1, -2)) * c["query_pre_attn_scalar"] ** -0.5
        probs = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
        o = (probs @ v).transpose(1, 2).reshape(B, S, a * d) @ w[at + "o_proj.weight"].t()
        x = x + _rms1(o, w[p + "post_attention_layernorm.weight"], eps)
        y = _rms1(x, w[p + "pre_feedforward_layernorm.weight"], eps)
        m = p + "mlp."
        act = F.gelu(y @ w[m + "gate_proj.weight"].t(), approximate="tanh") * (y @ w[m + "up_proj.weight"].t())
        x = x + _rms1(act @ w[m + "down_proj.weight"].t(), w[p + "post_feedforward_layernorm.weight"], eps)
    logits = _rms1(x, w["model.norm.weight"], eps) @ w["model.embed_tokens.weight"].t()
    return F.cross_entropy(logits.reshape(-1, c["vocab_size"]), win[:, 1:].reshape(-1)).item()


def matches(c, f, w, win, generic_loss):
    """True when the generic reference's loss (features f) equals this one's (config c) to 1e-12."""
    return _matches(loss(c, w, win), generic_loss, f, w, win)
