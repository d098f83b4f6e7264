"""gpt-oss's forward written out from its Hugging Face modules (GptOssAttention with
eager_attention_forward, GptOssTopKRouter, GptOssExperts, GptOssDecoderLayer, GptOssModel,
GptOssForCausalLM with load_balancing_loss_func), float64, to check the generic reference
(families.py with gpt_oss.py): the tensors each module builds from the config (nn.Linear and
nn.Parameter shapes), YaRN's frequencies and attention factor (_compute_yarn_parameters, with
truncate), RoPE on the two halves of each head (_apply_rotary_emb), the additive causal and
sliding masks (dtype minimum where masked), the sinks concatenated to the scores, the row max
subtracted, softmax, the sink column dropped; the router's linear, top-k and softmax over the
top-k; the experts token-gathered by one_hot and index_add_ with gate_up split [::2] / [1::2],
the clamps and (up + 1) * gate * sigmoid(alpha gate); and the load-balancing loss as
transformers computes it from the recorded router logits. Shares nothing with the engine;
imported by families_checks.py.
"""
import math

import torch
import torch.nn.functional as F

from by_hand import DT, as64, rms as _rms

DEFAULT_YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                "original_max_position_embeddings": 4096}


def module_shapes(c):
    """{name: shape} of the parameters Hugging Face's GptOssForCausalLM builds for config c."""
    h, H, V, L = c["hidden_size"], c["num_attention_heads"], c["vocab_size"], c["num_hidden_layers"]
    d = c.get("head_dim", 64) or h // H
    kv = c.get("num_key_value_heads", 8) or H
    E, I = c.get("num_local_experts", 128), c["intermediate_size"]
    bias = c.get("attention_bias", True)
    out = {"model.embed_tokens.weight": (V, h)}

    def lin(name, fan_in, fan_out, b):
        out[name + ".weight"] = (fan_out, fan_in)
        if b:
            out[name + ".bias"] = (fan_out,)

    for i in range(L):
        p = "model.layers.%d." % i
        a, m = p + "self_attn.", p + "mlp."
        out[p + "input_layernorm.weight"] = out[p + "post_attention_layernorm.weight"] = (h,)
        lin(a + "q_proj", h, H * d, bias)
        lin(a + "k_proj", h, kv * d, bias)
        lin(a + "v_proj", h, kv * d, bias)
        lin(a + "o_proj", H * d, h, bias)
        out[a + "sinks"] = (H,)
        out[m + "router.weight"], out[m + "router.bias"] = (E, h), (E,)
        out[m + "experts.gate_up_proj"], out[m + "experts.gate_up_proj_bias"] = (E, h, 2 * I), (E, 2 * I)
        out[m + "experts.down_proj"], out[m + "experts.down_proj_bias"] = (E, I, h), (E, h)
    out["model.norm.weight"] = (h,)
    if not c.get("tie_word_embeddings", False):
        out["lm_head.weight"] = (V, h)
    return out


def yarn(c):
    """(inv_freq [d / 2], attention_factor) as _compute_yarn_parameters gives them."""
    rs = c["rope_scaling"] if "rope_scaling" in c else DEFAULT_YARN
    d = c.get("head_dim", 64) or c["hidden_size"] // c["num_attention_heads"]
    base = float(c.get("rope_theta", 150000.0))
    factor, original = rs["factor"], c["max_position_embeddings"]
    if "original_max_position_embeddings" in rs:
        original = rs["original_max_position_embeddings"]
        factor = c["max_position_embeddings"] / original

    def get_mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    att = rs.get("attention_factor")
    if att is None:
        m, m_all = rs.get("mscale"), rs.get("mscale_all_dim")
        att = get_mscale(factor, m) / get_mscale(factor, m_all) if m and m_all else get_mscale(factor)

    def corr(rot):
        return d * math.log(original / (rot * 2 * math.pi)) / (2 * math.log(base))

    low, high = corr(rs.get("beta_fast") or 32), corr(rs.get("beta_slow") or 1)
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(d // 2, dtype=DT) - low) / (high - low)).clamp(0, 1)
    pos = base ** (torch.arange(0, d, 2, dtype=DT) / d)
    extra = 1 - ramp
    return (1.0 / (factor * pos)) * (1 - extra) + (1.0 / pos) * extra, att


def _rotary(x, cos, sin):  # _apply_rotary_emb: the head's two halves
    first, second = torch.chunk(x, 2, dim=-1)
    return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)


def _repeat_kv(t, n):
    B, kv, S, d = t.shape
    return t[:, :, None].expand(B, kv, n, S, d).reshape(B, kv * n, S, d)


def _masks(S, window):
    """Additive masks as the eager path gets them: 0 where visible, the dtype's minimum elsewhere."""
    q, k = torch.arange(S)[:, None], torch.arange(S)[None, :]
    low = torch.finfo(DT).min
    full = torch.zeros(S, S, dtype=DT).masked_fill(~(k <= q), low)
    sliding = torch.zeros(S, S, dtype=DT).masked_fill(~((k <= q) & (k > q - window)), low)
    return {"full_attention": full, "sliding_attention": sliding}


def _experts(c, w, m, x, idx, scores):
    """GptOssExperts.forward: expert by expert, the tokens that chose it gathered, its clamped
    SwiGLU, times their score in that slot, added back (index_add_)."""
    E = c.get("num_local_experts", 128)
    limit, alpha = c.get("swiglu_limit", 7.0), c.get("swiglu_alpha", 1.702)
    out = torch.zeros_like(x)
    mask = F.one_hot(idx, num_classes=E).permute(2, 1, 0)  # [E, k, T]
    for e in torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero():
        e = e[0]
        slot, token = torch.where(mask[e])
        gate_up = x[token] @ w[m + "experts.gate_up_proj"][e] + w[m + "experts.gate_up_proj_bias"][e]
        gate, up = gate_up[..., ::2], gate_up[..., 1::2]
        gate = gate.clamp(min=None, max=limit)
        up = up.clamp(min=-limit, max=limit)
        glu = gate * torch.sigmoid(gate * alpha)
        y = ((up + 1) * glu) @ w[m + "experts.down_proj"][e] + w[m + "experts.down_proj_bias"][e]
        out.index_add_(0, token, y * scores[token, slot, None])
    return out


def load_balancing_loss(logits, E, k):
    """load_balancing_loss_func without an attention mask."""
    routing = F.softmax(torch.cat(logits, dim=0), dim=-1)
    _, selected = torch.topk(routing, k, dim=-1)
    expert_mask = F.one_hot(selected, E)
    tokens_per_expert = torch.mean(expert_mask.to(DT), dim=0)
    router_prob_per_expert = torch.mean(routing, dim=0)
    return torch.sum(tokens_per_expert * router_prob_per_expert.unsqueeze(0)) * E


def loss(c, w, win):
    """Mean cross-entropy (plus router_aux_loss_coef times the load-balancing loss under
    output_router_logits) of windows [B, S + 1] under config c and Hugging Face-named weights w;
    a 0-d tensor, differentiable in w."""
    idx = win[:, :-1]
    B, S = idx.shape
    h, H, eps = c["hidden_size"], c["num_attention_heads"], c.get("rms_norm_eps", 1e-5)
    d = c.get("head_dim", 64) or h // H
    kv = c.get("num_key_value_heads", 8) or H
    E, k = c.get("num_local_experts", 128), c.get("num_experts_per_tok", 4)
    types = c.get("layer_types") or ["sliding_attention" if (i + 1) % 2 else "full_attention"
                                     for i in range(c["num_hidden_layers"])]
    inv, att = yarn(c)
    freqs = torch.arange(S, dtype=DT)[:, None] * inv
    cos, sin = freqs.cos() * att, freqs.sin() * att
    masks = _masks(S, c.get("sliding_window", 128))

    def lin(x, name):
        return x @ w[name + ".weight"].t() + (w[name + ".bias"] if name + ".bias" in w else 0)

    x = w["model.embed_tokens.weight"][idx]
    router_logits = []
    for i in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % i
        a, m = p + "self_attn.", p + "mlp."
        y = _rms(x, w[p + "input_layernorm.weight"], eps)
        q = lin(y, a + "q_proj").view(B, S, -1, d).transpose(1, 2)
        kk = lin(y, a + "k_proj").view(B, S, -1, d).transpose(1, 2)
        v = lin(y, a + "v_proj").view(B, S, -1, d).transpose(1, 2)
        q, kk = _rotary(q, cos, sin), _rotary(kk, cos, sin)
        kk, v = _repeat_kv(kk, H // kv), _repeat_kv(v, H // kv)
        scores = torch.matmul(q, kk.transpose(2, 3)) * d ** -0.5 + masks[types[i]]
        sinks = w[a + "sinks"].reshape(1, -1, 1, 1).expand(B, -1, S, -1)
        combined = torch.cat([scores, sinks], dim=-1)
        combined = combined - combined.max(dim=-1, keepdim=True).values
        probs = F.softmax(combined, dim=-1)[..., :-1]
        x = x + lin(torch.matmul(probs, v).transpose(1, 2).reshape(B, S, -1), a + "o_proj")
        y = _rms(x, w[p + "post_attention_layernorm.weight"], eps).reshape(B * S, h)
        logits = F.linear(y, w[m + "router.weight"], w[m + "router.bias"])
        router_logits.append(logits)
        top, chosen = torch.topk(logits, k, dim=-1)
        x = x + _experts(c, w, m, y, chosen, F.softmax(top, dim=1)).view(B, S, h)
    head = w["model.embed_tokens.weight"] if c.get("tie_word_embeddings", False) else w["lm_head.weight"]
    logits = _rms(x, w["model.norm.weight"], eps) @ head.t()
    out = F.cross_entropy(logits.reshape(-1, c["vocab_size"]), win[:, 1:].reshape(-1))
    if c.get("output_router_logits", False):
        out = out + c["router_aux_loss_coef"] * load_balancing_loss(router_logits, E, k)
    return out


def matches(c, f, w, win, generic_loss):
    """(loss gap, largest gradient gap over every tensor, smallest |gradient| of a sink) between
    this forward and the generic reference's (features f) on the same float64 weights."""
    w1 = {n: t.detach().clone().requires_grad_(True) for n, t in as64(w).items()}
    w2 = {n: t.detach().clone().requires_grad_(True) for n, t in as64(w).items()}
    a, b = loss(c, w1, win), generic_loss(w2, f, win)
    a.backward()
    b.backward()
    def grad(t):  # (an expert no token chose gets none from the gathered form)
        return torch.zeros_like(t) if t.grad is None else t.grad

    sinks = min(grad(w2[n]).abs().min().item() for n in w2 if n.endswith("self_attn.sinks"))
    return abs(a.item() - b.item()), max((grad(w1[n]) - grad(w2[n])).abs().max().item() for n in w1), sinks
