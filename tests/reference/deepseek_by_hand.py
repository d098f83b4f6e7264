"""DeepSeek-V3's and DeepSeek-V2's forward written out from their Hugging Face modules
(DeepseekV3Attention / DeepseekV2Attention, DeepseekV3MoE / DeepseekV2Moe, the decoder layers),
float64, to check the generic reference (families.py with deepseek.py): the tensors each module
builds (nn.Linear shapes from the config), YaRN's frequencies and attention factor, MLA step by
step (q through q_a_proj / q_a_layernorm / q_b_proj or q_proj, split [nope | rope]; the latent
kv_a_proj_with_mqa split [kv_lora_rank | rope], kv_a_layernorm, kv_b_proj split [nope | v]; RoPE
as V3 applies it (apply_rotary_pos_emb_interleave: de-interleaved then rotate_half, or plain
rotate_half without rope_interleave) and as V2 does (complex multiplication of adjacent pairs);
scores times the softmax scale), and the routers as Hugging Face writes them (group mask,
masked_fill 0, top-k, gather, then experts gathered and added back by index). Shares nothing with
the engine; imported by families_checks.py.
"""
import math

import torch
import torch.nn.functional as F

from by_hand import as64, causal, matches as _matches, rms as _rms, rotate_half

LATENT_EPS = 1e-6  # DeepseekV?RMSNorm(q_lora_rank) / (kv_lora_rank): the default eps


def module_shapes(c):
    """{name: shape} of the parameters (and V3's e_score_correction_bias buffer) Hugging Face's
    DeepseekV?ForCausalLM builds for config c."""
    h, H, V = c["hidden_size"], c["num_attention_heads"], c["vocab_size"]
    nope, rope, vd, r = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    bias = c.get("attention_bias", False)
    out = {"model.embed_tokens.weight": (V, h), "model.norm.weight": (h,), "lm_head.weight": (V, h)}

    def lin(name, fan_in, fan_out, b=False):
        out[name + ".weight"] = (fan_out, fan_in)
        if b:
            out[name + ".bias"] = (fan_out,)

    def mlp(p, width):
        lin(p + "gate_proj", h, width)
        lin(p + "up_proj", h, width)
        lin(p + "down_proj", width, h)

    for i in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % i
        a = p + "self_attn."
        out[p + "input_layernorm.weight"] = out[p + "post_attention_layernorm.weight"] = (h,)
        if c.get("q_lora_rank") is None:
            lin(a + "q_proj", h, H * (nope + rope))
        else:
            lin(a + "q_a_proj", h, c["q_lora_rank"], bias)
            out[a + "q_a_layernorm.weight"] = (c["q_lora_rank"],)
            lin(a + "q_b_proj", c["q_lora_rank"], H * (nope + rope))
        lin(a + "kv_a_proj_with_mqa", h, r + rope, bias)
        out[a + "kv_a_layernorm.weight"] = (r,)
        lin(a + "kv_b_proj", r, H * (nope + vd))
        lin(a + "o_proj", H * vd, h, bias)
        if i >= c["first_k_dense_replace"]:
            m = p + "mlp."
            lin(m + "gate", h, c["n_routed_experts"])
            if c["model_type"] == "deepseek_v3":
                out[m + "gate.e_score_correction_bias"] = (c["n_routed_experts"],)
            for e in range(c["n_routed_experts"]):
                mlp(m + "experts.%d." % e, c["moe_intermediate_size"])
            mlp(m + "shared_experts.", c["moe_intermediate_size"] * c["n_shared_experts"])
        else:
            mlp(p + "mlp.", c["intermediate_size"])
    return out


def yarn(c):
    """(inv_freq, attention_factor) of _compute_yarn_parameters over head_dim = qk_rope_head_dim."""
    rs, dim, base = c["rope_scaling"], c["qk_rope_head_dim"], float(c["rope_theta"])
    orig = rs["original_max_position_embeddings"]
    factor = c["max_position_embeddings"] / orig

    def get_mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    att = get_mscale(factor, rs["mscale"]) / get_mscale(factor, rs["mscale_all_dim"])

    def corr(rot):
        return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))

    low, high = max(math.floor(corr(rs["beta_fast"])), 0), min(math.ceil(corr(rs["beta_slow"])), dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    pos = base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    extra = 1 - ramp
    return (1.0 / (factor * pos)) * (1 - extra) + (1.0 / pos) * extra, att


def _rope_v3(x, cos, sin, interleave):
    if interleave:  # apply_rotary_pos_emb_interleave
        b, h, s, d = x.shape
        x = x.view(b, h, s, d // 2, 2).transpose(4, 3).reshape(b, h, s, d)
    return x * cos + rotate_half(x) * sin


def _rope_v2(x, freqs_cis):  # apply_rotary_emb
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(xc * freqs_cis).flatten(3)


def _router(c, w, m, x):
    """(topk_idx [T, k], topk_weight [T, k]) as DeepseekV3MoE / DeepseekV2Moe route."""
    T = x.shape[0]
    E, k, G, TG = c["n_routed_experts"], c["num_experts_per_tok"], c.get("n_group"), c.get("topk_group")
    logits = x @ w[m + "gate.weight"].t()
    if c["model_type"] == "deepseek_v3":
        scores = logits.sigmoid()
        choice = scores + w[m + "gate.e_score_correction_bias"]
        gs = choice.view(-1, G, E // G).topk(2, dim=-1)[0].sum(dim=-1)
    else:
        scores = choice = logits.softmax(dim=-1)
        if c["topk_method"] == "greedy":
            wt, idx = torch.topk(scores, k=k, dim=-1, sorted=False)
            return idx, wt * c["routed_scaling_factor"]
        gs = choice.view(T, G, -1).max(dim=-1).values
    gidx = torch.topk(gs, k=TG, dim=-1, sorted=False)[1]
    gmask = torch.zeros_like(gs)
    gmask.scatter_(1, gidx, 1)
    smask = gmask.unsqueeze(-1).expand(T, G, E // G).reshape(T, E)
    idx = torch.topk(choice.masked_fill(~smask.bool(), 0.0), k=k, dim=-1, sorted=False)[1]
    wt = scores.gather(1, idx)
    if c["model_type"] == "deepseek_v3" and c["norm_topk_prob"]:
        wt = wt / (wt.sum(dim=-1, keepdim=True) + 1e-20)
    return idx, wt * c["routed_scaling_factor"]


def _mlp(x, w, p):
    act = F.silu(x @ w[p + "gate_proj.weight"].t()) * (x @ w[p + "up_proj.weight"].t())
    return act @ w[p + "down_proj.weight"].t()


def _moe(c, w, m, x):
    idx, wt = _router(c, w, m, x)
    out = torch.zeros_like(x)
    mask = F.one_hot(idx, num_classes=c["n_routed_experts"]).permute(2, 0, 1)
    for e in range(c["n_routed_experts"]):
        token, slot = torch.where(mask[e])
        if token.numel():
            out.index_add_(0, token, _mlp(x[token], w, m + "experts.%d." % e) * wt[token, slot, None])
    return out + _mlp(x, w, m + "shared_experts.")


def loss(c, w, win):
    """Mean cross-entropy of windows [B, S + 1] under the Hugging Face config c (deepseek_v3 or
    deepseek_v2) and Hugging Face-named weights w."""
    w = as64(w)
    v3 = c["model_type"] == "deepseek_v3"
    idx = win[:, :-1]
    B, S = idx.shape
    h, eps = c["hidden_size"], c["rms_norm_eps"]
    nope, rope, vd, r = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    inv, att = yarn(c)
    freqs = torch.arange(S, dtype=torch.float64)[:, None] * inv
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos() * att, emb.sin() * att
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs) * att
    scaling = (nope + rope) ** -0.5
    if v3 and c["rope_scaling"].get("mscale_all_dim"):
        m = 0.1 * c["rope_scaling"]["mscale_all_dim"] * math.log(c["rope_scaling"]["factor"]) + 1.0
        scaling = scaling * m * m

    def lin(x, name):
        return x @ w[name + ".weight"].t() + (w[name + ".bias"] if name + ".bias" in w else 0)

    x = w["model.embed_tokens.weight"][idx]
    for i in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % i
        a = p + "self_attn."
        y = _rms(x, w[p + "input_layernorm.weight"], eps)
        if c.get("q_lora_rank") is None:
            q = lin(y, a + "q_proj")
        else:
            q = lin(_rms(lin(y, a + "q_a_proj"), w[a + "q_a_layernorm.weight"], LATENT_EPS), a + "q_b_proj")
        q = q.view(B, S, -1, nope + rope).transpose(1, 2)
        q_pass, q_rot = torch.split(q, [nope, rope], dim=-1)
        k_pass, k_rot = torch.split(lin(y, a + "kv_a_proj_with_mqa"), [r, rope], dim=-1)
        k_pass = lin(_rms(k_pass, w[a + "kv_a_layernorm.weight"], LATENT_EPS), a + "kv_b_proj")
        k_pass = k_pass.view(B, S, -1, nope + vd).transpose(1, 2)
        k_pass, value = torch.split(k_pass, [nope, vd], dim=-1)
        k_rot = k_rot.view(B, 1, S, rope)
        if v3:
            inter = c.get("rope_interleave", True)
            q_rot, k_rot = _rope_v3(q_rot, cos, sin, inter), _rope_v3(k_rot, cos, sin, inter)
        else:
            q_rot, k_rot = _rope_v2(q_rot, freqs_cis), _rope_v2(k_rot, freqs_cis)
        k_rot = k_rot.expand(*k_pass.shape[:-1], -1)
        query, key = torch.cat((q_pass, q_rot), dim=-1), torch.cat((k_pass, k_rot), dim=-1)
        probs = (query @ key.transpose(2, 3) * scaling + causal(S)).softmax(-1)
        x = x + lin((probs @ value).transpose(1, 2).reshape(B, S, -1), a + "o_proj")
        y = _rms(x, w[p + "post_attention_layernorm.weight"], eps)
        if i >= c["first_k_dense_replace"]:
            x = x + _moe(c, w, p + "mlp.", y.reshape(B * S, h)).view(B, S, h)
        else:
            x = x + _mlp(y, w, p + "mlp.")
    logits = _rms(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].t()
    return F.cross_entropy(logits.reshape(-1, c["vocab_size"]), win[:, 1:].reshape(-1)).item()


def matches(c, f, w, win, generic_loss):
    """True when the generic reference's loss (features f) equals this one's to 1e-12."""
    return _matches(loss(c, w, win), generic_loss, f, w, win)
