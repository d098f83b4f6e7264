"""Mixtral's, Qwen3-MoE's and Qwen2-MoE's forward written out from their Hugging Face decoder
layers (MixtralSparseMoeBlock, Qwen3MoeSparseMoeBlock, Qwen2MoeSparseMoeBlock), float64, to check the generic reference
(families.py) on the mixture of experts: the router's logits, their softmax, the top
num_experts_per_tok experts per token and their scores (divided by their sum: Mixtral always,
Qwen3-MoE under norm_topk_prob), then expert by expert the tokens that chose it gathered, its
SwiGLU MLP on them, times their scores, added back into their rows (index_add_). Qwen3-MoE's
layers in mlp_only_layers keep a dense MLP; its attention has per-head q_norm / k_norm. Qwen2-MoE
has q/k/v biases and adds a shared expert times sigmoid(x · shared_expert_gate). Pre-norm
blocks, no biases, grouped-query attention, an untied head. Shares nothing with the engine;
imported by families_checks.py.
"""
import math

import torch
import torch.nn.functional as F

from by_hand import as64, causal, cos_sin, matches as _matches, repeat_kv, rms as _rms, rotate


def _mlp(x, w, p):
    return (F.silu(x @ w[p + "gate_proj.weight"].t()) * (x @ w[p + "up_proj.weight"].t())) @ w[p + "down_proj.weight"].t()


def _sparse_block(x, w, m, names, E, k, norm, shared=False):
    T, h = x.shape
    probs = F.softmax(x @ w[m + "gate.weight"].t(), dim=-1)
    top, chosen = torch.topk(probs, k, dim=-1)
    if norm:
        top = top / top.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(x)
    for e in range(E):
        token, slot = torch.where(chosen == e)
        if token.numel() == 0:
            continue
        ex = m + "experts.%d." % e
        xs = x[token]
        y = (F.silu(xs @ w[ex + names[0] + ".weight"].t()) * (xs @ w[ex + names[1] + ".weight"].t())) @ \
            w[ex + names[2] + ".weight"].t()
        out.index_add_(0, token, y * top[token, slot, None])
    if shared:  # Qwen2-MoE's shared expert and its gate
        out = out + torch.sigmoid(x @ w[m + "shared_expert_gate.weight"].t()) * _mlp(x, w, m + "shared_expert.")
    return out


def loss(c, w, win):
    """Mean cross-entropy of windows [B, S + 1] under the Hugging Face config `c` (mixtral or
    qwen3_moe) and Hugging Face-named weights `w`."""
    w = as64(w)
    mixtral = c["model_type"] == "mixtral"
    idx = win[:, :-1]
    B, S = idx.shape
    h, a, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    d = c.get("head_dim") or h // a
    eps = c["rms_norm_eps"]
    E = c["num_local_experts"] if mixtral else c["num_experts"]
    k = c["num_experts_per_tok"]
    norm = True if mixtral else c.get("norm_topk_prob", False)
    step, dense = c.get("decoder_sparse_step", 1), c.get("mlp_only_layers") or []
    cos, sin = cos_sin(c["rope_theta"], d, S)
    mask = causal(S)
    x = w["model.embed_tokens.weight"][idx]
    for l in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % l
        at = p + "self_attn."
        y = _rms(x, w[p + "input_layernorm.weight"], eps)
        bias = c["model_type"] == "qwen2_moe"  # q/k/v biases
        q = (y @ w[at + "q_proj.weight"].t() + (w[at + "q_proj.bias"] if bias else 0)).view(B, S, a, d)
        kk = (y @ w[at + "k_proj.weight"].t() + (w[at + "k_proj.bias"] if bias else 0)).view(B, S, kv, d)
        if c["model_type"] == "qwen3_moe":
            q, kk = _rms(q, w[at + "q_norm.weight"], eps), _rms(kk, w[at + "k_norm.weight"], eps)
        q, kk = q.transpose(1, 2), kk.transpose(1, 2)
        v = (y @ w[at + "v_proj.weight"].t() + (w[at + "v_proj.bias"] if bias else 0)).view(B, S, kv, d).transpose(1, 2)
        q, kk, v = rotate(q, cos, sin), repeat_kv(rotate(kk, cos, sin), a), repeat_kv(v, a)
        probs = (q @ kk.transpose(-1, -2) / math.sqrt(d) + mask).softmax(-1)
        x = x + (probs @ v).transpose(1, 2).reshape(B, S, a * d) @ w[at + "o_proj.weight"].t()
        y = _rms(x, w[p + "post_attention_layernorm.weight"], eps).reshape(B * S, h)
        if mixtral:
            out = _sparse_block(y, w, p + "block_sparse_moe.", ("w1", "w3", "w2"), E, k, norm)
        elif l not in dense and (l + 1) % step == 0:
            out = _sparse_block(y, w, p + "mlp.", ("gate_proj", "up_proj", "down_proj"), E, k, norm,
                                shared=c["model_type"] == "qwen2_moe")
        else:
            out = _mlp(y, w, p + "mlp.")
        x = x + out.view(B, S, h)
    logits = _rms(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].t()
    return F.cross_entropy(logits.reshape(-1, c["vocab_size"]), win[:, 1:].reshape(-1)).item()


def matches(c, f, w, win, generic_loss):
    """True when the generic reference's loss (features f) equals this one's to 1e-12."""
    return _matches(loss(c, w, win), generic_loss, f, w, win)
