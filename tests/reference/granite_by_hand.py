"""Granite's forward written out from its Hugging Face decoder layer (GraniteDecoderLayer,
GraniteModel, GraniteForCausalLM), float64, to check the generic reference (families.py) on the
four multipliers Granite adds to a Llama block: the embeddings times embedding_multiplier, the
attention scores times attention_multiplier (in place of 1 / sqrt(head_dim)), each branch's
output times residual_multiplier before its residual add, and the logits divided by
logits_scaling. Shares nothing with the engine; imported by families_checks.py.
"""
import torch.nn.functional as F

from by_hand import as64, causal, cos_sin, matches as _matches, repeat_kv, rms as _rms, rotate


def loss(f, w, win):
    """Mean cross-entropy of windows [B, S + 1] under the Granite config's features `f`."""
    w = as64(w)
    idx = win[:, :-1]
    B, S = idx.shape
    a, kv, d, eps = f["heads"], f["kv_heads"], f["head_dim"], f["norm_eps"]
    cos, sin = cos_sin(f["rope_theta"], d, S)
    mask = causal(S)
    x = w["model.embed_tokens.weight"][idx] * f["embedding_multiplier"]
    for l in range(f["layers"]):
        p = "model.layers.%d." % l
        at = p + "self_attn."
        y = _rms(x, w[p + "input_layernorm.weight"], eps)
        q = (y @ w[at + "q_proj.weight"].t()).view(B, S, a, d).transpose(1, 2)
        k = (y @ w[at + "k_proj.weight"].t()).view(B, S, kv, d).transpose(1, 2)
        v = (y @ w[at + "v_proj.weight"].t()).view(B, S, kv, d).transpose(1, 2)
        q, k, v = rotate(q, cos, sin), repeat_kv(rotate(k, cos, sin), a), repeat_kv(v, a)
        probs = (q @ k.transpose(-1, -2) * f["attn_scale"] + mask).softmax(-1)
        o = (probs @ v).transpose(1, 2).reshape(B, S, a * d) @ w[at + "o_proj.weight"].t()
        x = x + o * f["residual_multiplier"]
        y = _rms(x, w[p + "post_attention_layernorm.weight"], eps)
        m = p + "mlp."
        act = F.silu(y @ w[m + "gate_proj.weight"].t()) * (y @ w[m + "up_proj.weight"].t())
        x = x + (act @ w[m + "down_proj.weight"].t()) * f["residual_multiplier"]
    head = w["model.embed_tokens.weight"] if f["tied_embeddings"] else w["lm_head.weight"]
    logits = (_rms(x, w["model.norm.weight"], eps) @ head.t()) / f["logits_scaling"]
    return F.cross_entropy(logits.reshape(-1, f["vocab"]), win[:, 1:].reshape(-1)).item()


def matches(f, w, win, generic_loss):
    """True when the generic reference's loss equals this one's to 1e-12."""
    return _matches(loss(f, w, win), generic_loss, f, w, win)
