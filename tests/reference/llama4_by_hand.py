"""Llama 4's text forward written out from its Hugging Face modules (Llama4TextConfig's
defaults, Llama4TextRotaryEmbedding with _compute_llama3_parameters, apply_rotary_emb,
Llama4TextL2Norm, Llama4TextAttention with eager_attention_forward, the chunked and full causal
masks, Llama4Router, Llama4TextMoe with Llama4TextExperts, Llama4TextMLP, Llama4TextDecoderLayer,
Llama4ForCausalLM), float64, to check the generic reference (families.py with llama4.py): the
tensors each module builds from the config; RoPE as complex numbers (torch.view_as_complex of
each head's adjacent pairs times torch.polar(attention_factor, angle)); the additive masks (the
dtype's minimum where masked); the router's -inf-filled top-k through a sigmoid; the experts
run batched over every token (the input repeated per expert, scaled by that expert's score,
torch.bmm with gate_up_proj, chunk(2) into gate and up, torch.bmm with down_proj, summed over
the experts) plus the shared expert. Shares nothing with the engine; imported by
families_checks.py.
"""
import math

import torch
import torch.nn.functional as F

from by_hand import DT, as64, rms as _rms


def _cfg(c):
    """The fields Llama4TextConfig fills in from c (its defaults where absent)."""
    g = dict(num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-5, intermediate_size=8192,
             intermediate_size_mlp=16384, num_local_experts=16, num_experts_per_tok=1, interleave_moe_layer_step=1,
             no_rope_layer_interval=4, attention_chunk_size=8192, attn_temperature_tuning=True, floor_scale=8192,
             attn_scale=0.1, use_qk_norm=True, attention_bias=False, tie_word_embeddings=False,
             max_position_embeddings=4096 * 32)
    g.update(c)  # (a null head_dim or kv heads is filled in below, as the config class does)
    L, H = g["num_hidden_layers"], g["num_attention_heads"]
    g["head_dim"] = g["head_dim"] or g["hidden_size"] // H
    g["num_key_value_heads"] = g["num_key_value_heads"] or H
    if not g.get("no_rope_layers"):
        g["no_rope_layers"] = [int((i + 1) % g["no_rope_layer_interval"] != 0) for i in range(L)]
    if g.get("moe_layers") is None:
        s = g["interleave_moe_layer_step"]
        g["moe_layers"] = list(range(s - 1, L, s))
    if not g.get("layer_types"):
        g["layer_types"] = ["chunked_attention" if r else "full_attention" for r in g["no_rope_layers"]]
    if "rope_scaling" not in c and isinstance(c.get("rope_parameters"), dict):
        rp = dict(c["rope_parameters"])
        g["rope_theta"] = rp.pop("rope_theta", 500000.0)
        g["rope_scaling"] = None if rp.get("rope_type", "default") == "default" else rp
    g.setdefault("rope_theta", 500000.0)
    return g


def module_shapes(c):
    """{name: shape} of the parameters Llama4ForCausalLM builds for config c."""
    g = _cfg(c)
    h, H, V, d = g["hidden_size"], g["num_attention_heads"], g["vocab_size"], g["head_dim"]
    kv, E = g["num_key_value_heads"], g["num_local_experts"]
    I, Imlp = g["intermediate_size"], g["intermediate_size_mlp"]
    out = {"model.embed_tokens.weight": (V, h)}

    def lin(name, fan_in, fan_out, bias=False):
        out[name + ".weight"] = (fan_out, fan_in)
        if bias:
            out[name + ".bias"] = (fan_out,)

    for i in range(g["num_hidden_layers"]):
        p = "model.layers.%d." % i
        a, m = p + "self_attn.", p + "feed_forward."
        for n, fi, fo in (("q_proj", h, H * d), ("k_proj", h, kv * d), ("v_proj", h, kv * d), ("o_proj", H * d, h)):
            lin(a + n, fi, fo, g["attention_bias"])
        if i in g["moe_layers"]:  # Llama4TextMoe: experts, router, shared_expert
            out[m + "experts.gate_up_proj"], out[m + "experts.down_proj"] = (E, h, 2 * I), (E, I, h)
            lin(m + "router", h, E)
            mlp, width = m + "shared_expert.", I
        else:
            mlp, width = m, Imlp
        lin(mlp + "gate_proj", h, width)
        lin(mlp + "up_proj", h, width)
        lin(mlp + "down_proj", width, h)
        out[p + "input_layernorm.weight"] = out[p + "post_attention_layernorm.weight"] = (h,)
    out["model.norm.weight"] = (h,)
    if not g["tie_word_embeddings"]:
        out["lm_head.weight"] = (V, h)
    return out


def inv_freq(g):
    """(inv_freq [d / 2], attention_factor): the default or _compute_llama3_parameters."""
    d, base = g["head_dim"], float(g["rope_theta"])
    inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).to(DT) / d))
    rs = g.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "default":
        return inv, 1.0
    if kind != "llama3":
        raise ValueError("llama4_by_hand: rope_type %r not written out" % kind)
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    out = []
    for f_i, wl in zip(inv.tolist(), wavelen.tolist()):
        if wl < old / hi:  # high frequency: kept
            out.append(f_i)
        elif wl > old / lo:  # low frequency: divided
            out.append(f_i / factor)
        else:  # in between: smoothed
            smooth = (old / wl - lo) / (hi - lo)
            out.append((1 - smooth) * f_i / factor + smooth * f_i)
    return torch.tensor(out, dtype=DT), 1.0


def _rotary(x, freqs_cis):
    """apply_rotary_emb: x [B, S, heads, d] as complex pairs times freqs_cis [S, d / 2]."""
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(xc * freqs_cis[None, :, None, :]).flatten(3)


def _l2(x, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _repeat_kv(t, n):
    B, kv, S, d = t.shape
    return t[:, :, None].expand(B, kv, n, S, d).reshape(B, kv * n, S, d)


def _masks(S, chunk):
    """Additive masks by layer type: 0 where visible, the dtype's minimum elsewhere."""
    low = torch.finfo(DT).min
    q, k = torch.arange(S).view(S, 1), torch.arange(S).view(1, S)
    full = k <= q
    out = {"full_attention": torch.zeros(S, S, dtype=DT).masked_fill(~full, low)}
    if chunk:
        same = torch.div(k, chunk, rounding_mode="floor") == torch.div(q, chunk, rounding_mode="floor")
        out["chunked_attention"] = torch.zeros(S, S, dtype=DT).masked_fill(~(full & same), low)
    return out


def _mlp(w, p, x):
    act = F.silu(x @ w[p + "gate_proj.weight"].t()) * (x @ w[p + "up_proj.weight"].t())
    return act @ w[p + "down_proj.weight"].t()


def _moe(g, w, m, x):
    """Llama4TextMoe on x [T, hidden]: router, sigmoid of the -inf-filled top-k, the input repeated
    per expert times that expert's score, the batched experts, summed over experts, + shared."""
    T, h = x.shape
    E, k = g["num_local_experts"], g["num_experts_per_tok"]
    logits = x @ w[m + "router.weight"].t()
    top, idx = torch.topk(logits, k, dim=1)
    router_scores = torch.sigmoid(torch.full_like(logits, float("-inf")).scatter(1, idx, top))  # [T, E]
    routed_in = x.repeat(E, 1) * router_scores.transpose(0, 1).reshape(-1, 1)  # expert-major [E * T, h]
    gate_up = torch.bmm(routed_in.view(E, T, h), w[m + "experts.gate_up_proj"])
    gate, up = gate_up.chunk(2, dim=-1)
    routed_out = torch.bmm(up * F.silu(gate), w[m + "experts.down_proj"]).reshape(E, T, h)
    return _mlp(w, m + "shared_expert.", x) + routed_out.sum(dim=0)


def loss(c, w, win):
    """Mean cross-entropy of windows [B, S + 1] under config c and Hugging Face-named weights w
    (a 0-d tensor, differentiable in w)."""
    g = _cfg(c)
    idx = win[:, :-1]
    B, S = idx.shape
    H, d, kv, eps = g["num_attention_heads"], g["head_dim"], g["num_key_value_heads"], g["rms_norm_eps"]
    inv, att = inv_freq(g)
    angles = torch.arange(S, dtype=DT)[:, None] * inv[None, :]
    freqs_cis = torch.polar(torch.full_like(angles, att), angles)  # [S, d / 2]
    masks = _masks(S, g["attention_chunk_size"])
    pos = torch.arange(S, dtype=DT)
    temp = torch.log1p(torch.floor((pos + 1.0) / g["floor_scale"])) * g["attn_scale"] + 1.0

    def lin(x, name):
        return x @ w[name + ".weight"].t() + (w[name + ".bias"] if name + ".bias" in w else 0)

    x = w["model.embed_tokens.weight"][idx]
    for i in range(g["num_hidden_layers"]):
        p = "model.layers.%d." % i
        a, m = p + "self_attn.", p + "feed_forward."
        use_rope = g["no_rope_layers"][i]
        y = _rms(x, w[p + "input_layernorm.weight"], eps)
        q = lin(y, a + "q_proj").view(B, S, -1, d)
        k = lin(y, a + "k_proj").view(B, S, -1, d)
        v = lin(y, a + "v_proj").view(B, S, -1, d).transpose(1, 2)
        if use_rope:
            q, k = _rotary(q, freqs_cis), _rotary(k, freqs_cis)
            if g["use_qk_norm"]:
                q, k = _l2(q, eps), _l2(k, eps)
        elif g["attn_temperature_tuning"]:
            q = q * temp.view(1, S, 1, 1)
        q, k = q.transpose(1, 2), _repeat_kv(k.transpose(1, 2), H // kv)
        v = _repeat_kv(v, H // kv)
        scores = torch.matmul(q, k.transpose(2, 3)) * d ** -0.5 + masks[g["layer_types"][i]]
        o = torch.matmul(F.softmax(scores, dim=-1), v).transpose(1, 2).reshape(B, S, -1)
        x = x + lin(o, a + "o_proj")
        y = _rms(x, w[p + "post_attention_layernorm.weight"], eps)
        if i in g["moe_layers"]:
            x = x + _moe(g, w, m, y.reshape(B * S, -1)).view(B, S, -1)
        else:
            x = x + _mlp(w, m, y)
    head = w["model.embed_tokens.weight"] if g["tie_word_embeddings"] else w["lm_head.weight"]
    logits = _rms(x, w["model.norm.weight"], eps) @ head.t()
    return F.cross_entropy(logits.reshape(-1, g["vocab_size"]), win[:, 1:].reshape(-1))


def matches(c, f, w, win, generic_loss):
    """(loss gap, largest gradient gap over every tensor, smallest |gradient| over the routers'
    and the experts' tensors) between this forward and the generic reference's (features f)."""
    w1 = {n: t.detach().clone().requires_grad_(True) for n, t in as64(w).items()}
    w2 = {n: t.detach().clone().requires_grad_(True) for n, t in as64(w).items()}
    a, b = loss(c, w1, win), generic_loss(w2, f, win)
    a.backward()
    b.backward()
    def grad(t):  # (a tensor the forward does not read gets none)
        return torch.zeros_like(t) if t.grad is None else t.grad

    routed = [n for n in w2 if n.endswith(("router.weight", "experts.gate_up_proj", "experts.down_proj"))]
    least = min(grad(w2[n]).abs().max().item() for n in routed) if routed else 0.0
    return abs(a.item() - b.item()), max((grad(w1[n]) - grad(w2[n])).abs().max().item() for n in w1), least
