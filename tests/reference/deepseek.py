"""DeepSeek-V2 and DeepSeek-V3 in the float64 family reference (families.py), written from Hugging
Face's DeepseekV2ForCausalLM and DeepseekV3ForCausalLM (transformers' models/deepseek_v2 and
models/deepseek_v3): the features read from their config.json, their tensor names, multi-head
latent attention (MLA) and their routers. Shares nothing with the engine.

MLA, per layer (H heads, nope = qk_nope_head_dim, rope = qk_rope_head_dim, v = v_head_dim):
  q  = q_proj(y), or q_b_proj(RMSNorm_q_a(q_a_proj(y))) when q_lora_rank is set; per head
       [q_nope | q_pe];
  kv_a_proj_with_mqa(y) = [c (kv_lora_rank) | k_pe (rope)]; kv_b_proj(RMSNorm_kv_a(c)) per head
       [k_nope | value (v)];
  RoPE (over rope dims, pairs (2i, 2i+1) at frequency i) on q_pe and on k_pe, the one k_pe
       shared by every head; cos and sin carry YaRN's attention factor;
  softmax((q_nope.k_nope + q_pe.k_pe) * scale) with scale = (nope + rope)^-0.5, times mscale^2
       (mscale = 0.1 mscale_all_dim ln(factor) + 1) in V3 only (Hugging Face's V2 keeps the plain
       scale); o_proj over the heads' values.
The two latent RMSNorms (q_a_layernorm, kv_a_layernorm) use RMSNorm's default eps, 1e-6, not
rms_norm_eps, as Hugging Face builds them.

MoE (layers l >= first_k_dense_replace; moe_layer_freq is not read, as in Hugging Face):
  V3: sigmoid scores; experts chosen on scores + e_score_correction_bias: per group (n_group) the
      sum of its two best, the topk_group best groups kept, the others' scores set to 0, the
      top-k of what is left; weights the unbiased sigmoid scores of those, divided by their sum
      (+1e-20) under norm_topk_prob, then times routed_scaling_factor.
  V2: softmax scores; greedy (plain top-k) or group_limited_greedy (group score = its max, the
      same masking); weights times routed_scaling_factor, never renormalised (Hugging Face's V2
      does not read norm_topk_prob).
  Both: SwiGLU experts of moe_intermediate_size, dropless; one ungated shared MLP of width
  moe_intermediate_size * n_shared_experts added. No auxiliary loss in either.
"""
import math

import torch
import torch.nn.functional as F

from rope_tables import apply_rope

LATENT_NORM_EPS = 1e-6
MODEL_TYPES = ("deepseek_v3", "deepseek_v2")


def _get(c, key, default=None):
    v = c.get(key, default)
    return default if v is None else v


def yarn_mscale(factor, m=1.0):
    return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0


def softmax_scale(c):
    """(nope + rope)^-0.5, times mscale(factor, mscale_all_dim)^2 in V3 under a scaled RoPE."""
    scale = (c["qk_nope_head_dim"] + c["qk_rope_head_dim"]) ** -0.5
    rs = c.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    if c["model_type"] == "deepseek_v3" and kind != "default" and rs.get("mscale_all_dim"):
        m = yarn_mscale(rs["factor"], rs["mscale_all_dim"])
        scale *= m * m
    return scale


def update_features(c, f):
    """DeepSeek's features over the Llama-like defaults `f` of families.features_from_hf.
    head_dim is qk_rope_head_dim (the RoPE tables' width), as Hugging Face's configs set it."""
    v3 = c["model_type"] == "deepseek_v3"
    if _get(c, "mlp_bias", False):
        raise ValueError("deepseek: mlp_bias is not modelled")
    a = c["num_attention_heads"]
    if _get(c, "num_key_value_heads", a) != a:
        raise ValueError("deepseek: MLA needs num_key_value_heads = num_attention_heads")
    bias = _get(c, "attention_bias", False)
    f.update(names="deepseek", kv_heads=a, head_dim=c["qk_rope_head_dim"], attn_scale=softmax_scale(c),
             qkv_bias=bias, out_bias=bias, mlp_bias=False, rms_norm_latent_eps=LATENT_NORM_EPS,
             rope_interleave=_get(c, "rope_interleave", True) if v3 else True,  # V2: complex pairs
             mla=dict(q_lora_rank=c.get("q_lora_rank"), kv_lora_rank=c["kv_lora_rank"],
                      nope=c["qk_nope_head_dim"], rope=c["qk_rope_head_dim"], v=c["v_head_dim"]))
    E = c.get("n_routed_experts")
    if not E:
        return
    method = _get(c, "topk_method", "greedy")
    if not v3 and method not in ("greedy", "group_limited_greedy"):
        raise ValueError("deepseek_v2: topk_method %r" % method)
    grouped = v3 or method == "group_limited_greedy"
    first = _get(c, "first_k_dense_replace", 3 if v3 else 0)  # (the defaults: Hugging Face's configs)
    shared = c.get("n_shared_experts", 1 if v3 else 2) or 0
    f["moe"] = dict(experts=E, top_k=c["num_experts_per_tok"], ffn=c["moe_intermediate_size"],
                    norm=bool(_get(c, "norm_topk_prob", True)) if v3 else False,
                    shared=c["moe_intermediate_size"] * shared,
                    sparse=[l >= first for l in range(f["layers"])],
                    scoring="sigmoid" if v3 else "softmax", score_bias=v3,
                    groups=_get(c, "n_group", 8 if v3 else 1) if grouped else 1,
                    topk_group=_get(c, "topk_group", 4 if v3 else 1) if grouped else 1,
                    group_score="top2_sum" if v3 else "max",
                    scaling=_get(c, "routed_scaling_factor", 2.5 if v3 else 1.0))


def tensor_shapes(f):
    """{Hugging Face name: shape} of a DeepSeek model's weights."""
    h, ff, V, H, m = f["hidden"], f["ffn"], f["vocab"], f["heads"], f["mla"]
    qk = m["nope"] + m["rope"]
    s = {"model.embed_tokens.weight": (V, h)}
    for l in range(f["layers"]):
        p = "model.layers.%d." % l
        a = p + "self_attn."
        s[p + "input_layernorm.weight"], s[p + "post_attention_layernorm.weight"] = (h,), (h,)
        if m["q_lora_rank"]:
            r = m["q_lora_rank"]
            s[a + "q_a_proj.weight"], s[a + "q_a_layernorm.weight"] = (r, h), (r,)
            if f["qkv_bias"]:
                s[a + "q_a_proj.bias"] = (r,)
            s[a + "q_b_proj.weight"] = (H * qk, r)
        else:
            s[a + "q_proj.weight"] = (H * qk, h)
        kv = m["kv_lora_rank"] + m["rope"]
        s[a + "kv_a_proj_with_mqa.weight"] = (kv, h)
        if f["qkv_bias"]:
            s[a + "kv_a_proj_with_mqa.bias"] = (kv,)
        s[a + "kv_a_layernorm.weight"] = (m["kv_lora_rank"],)
        s[a + "kv_b_proj.weight"] = (H * (m["nope"] + m["v"]), m["kv_lora_rank"])
        s[a + "o_proj.weight"] = (h, H * m["v"])
        if f["out_bias"]:
            s[a + "o_proj.bias"] = (h,)
        mp = p + "mlp."
        e = f.get("moe")
        if e and e["sparse"][l]:
            s[mp + "gate.weight"] = (e["experts"], h)
            if e["score_bias"]:
                s[mp + "gate.e_score_correction_bias"] = (e["experts"],)
            mlps = [(mp + "experts.%d." % x, e["ffn"]) for x in range(e["experts"])]
            if e["shared"]:
                mlps.append((mp + "shared_experts.", e["shared"]))
        else:
            mlps = [(mp, ff)]
        for q, width in mlps:
            s[q + "gate_proj.weight"], s[q + "up_proj.weight"] = (width, h), (width, h)
            s[q + "down_proj.weight"] = (h, width)
    s["model.norm.weight"] = (h,)
    if not f["tied_embeddings"]:
        s["lm_head.weight"] = (V, h)
    return s


def layer(w, f, l):
    """Layer l's pieces, as families._layer gives them (norm slots included)."""
    p = "model.layers.%d." % l
    a, mp = p + "self_attn.", p + "mlp."
    P = {"attn_in": (w[p + "input_layernorm.weight"], None), "attn_out": None,
         "mlp_in": (w[p + "post_attention_layernorm.weight"], None), "mlp_out": None}
    if f["mla"]["q_lora_rank"]:
        P["q_a"], P["q_a_b"] = w[a + "q_a_proj.weight"], w.get(a + "q_a_proj.bias")
        P["q_a_norm"], P["q_b"] = w[a + "q_a_layernorm.weight"], w[a + "q_b_proj.weight"]
    else:
        P["q"] = w[a + "q_proj.weight"]
    P["kv_a"], P["kv_a_b"] = w[a + "kv_a_proj_with_mqa.weight"], w.get(a + "kv_a_proj_with_mqa.bias")
    P["kv_a_norm"], P["kv_b"] = w[a + "kv_a_layernorm.weight"], w[a + "kv_b_proj.weight"]
    P["o"], P["o_b"] = w[a + "o_proj.weight"], w.get(a + "o_proj.bias")
    names = ("gate_proj", "up_proj", "down_proj")
    e = f.get("moe")
    if e and e["sparse"][l]:
        P["router"], P["score_bias"] = w[mp + "gate.weight"], w.get(mp + "gate.e_score_correction_bias")
        P["experts"] = [tuple(w[mp + "experts.%d.%s.weight" % (x, n)] for n in names) for x in range(e["experts"])]
        if e["shared"]:
            P["shared"] = tuple(w[mp + "shared_experts.%s.weight" % n] for n in names)
    else:
        P["gate"], P["up"], P["down"] = (w[mp + n + ".weight"] for n in names)
    return P


def _linear(x, weight, bias=None):
    y = x @ weight.t()
    return y if bias is None else y + bias


def _rms(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate(x, rope, interleave):
    """RoPE over the last dim of x (its rope dims): pairs (2i, 2i + 1) at frequency i when
    interleaved (V3's rope_interleave, V2's complex form), else (i, i + d/2) (rotate_half)."""
    cos, sin, rd = rope
    if not interleave:
        return apply_rope(x, cos, sin, rd)
    c, s = cos[:, : rd // 2], sin[:, : rd // 2]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x1 * c + x0 * s), dim=-1).flatten(-2)


def attention(f, P, y, rope):
    """Multi-head latent attention of y [B, S, hidden]: o_proj of the heads' values [B, S, hidden]."""
    B, S, _ = y.shape
    H, m, eps = f["heads"], f["mla"], f["rms_norm_latent_eps"]
    nope, rd, vd, r = m["nope"], m["rope"], m["v"], m["kv_lora_rank"]
    if "q" in P:
        q = _linear(y, P["q"])
    else:
        q = _linear(_rms(_linear(y, P["q_a"], P.get("q_a_b")), P["q_a_norm"], eps), P["q_b"])
    q = q.view(B, S, H, nope + rd).transpose(1, 2)
    q_nope, q_pe = q[..., :nope], q[..., nope:]
    kv = _linear(y, P["kv_a"], P.get("kv_a_b"))
    latent, k_pe = kv[..., :r], kv[..., r:].unsqueeze(1)  # k_pe [B, 1, S, rope]: one for all heads
    kv = _linear(_rms(latent, P["kv_a_norm"], eps), P["kv_b"]).view(B, S, H, nope + vd).transpose(1, 2)
    k_nope, v = kv[..., :nope], kv[..., nope:]
    if rope is not None:
        q_pe, k_pe = rotate(q_pe, rope, f["rope_interleave"]), rotate(k_pe, rope, f["rope_interleave"])
    q = torch.cat((q_nope, q_pe), dim=-1)
    k = torch.cat((k_nope, k_pe.expand(B, H, S, rd)), dim=-1)
    scale = f["attn_scale"] or 1.0 / math.sqrt(f["head_dim"])
    scores = (q @ k.transpose(-2, -1)) * scale
    causal = torch.ones(S, S, dtype=torch.bool).tril()
    probs = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
    ctx = (probs @ v).transpose(1, 2).reshape(B, S, H * vd)
    return _linear(ctx, P["o"], P.get("o_b"))


def choose(e, scores, bias):
    """Indices [T.., top_k] of the experts each token is routed to: on scores (+ the correction
    bias in V3), within the topk_group best groups (a group's score: the sum of its two best, V3,
    or its best, V2), the scores of the other groups' experts set to 0 as Hugging Face masks them."""
    with torch.no_grad():
        s = scores + bias if (e["score_bias"] and bias is not None) else scores
        E, G = s.shape[-1], e["groups"]
        per_group = s.unflatten(-1, (G, E // G))
        if e["group_score"] == "top2_sum":
            group = per_group.topk(2, dim=-1).values.sum(-1)
        else:
            group = per_group.max(dim=-1).values
        keep = torch.zeros_like(group, dtype=torch.bool)
        keep.scatter_(-1, group.topk(e["topk_group"], dim=-1).indices, True)
        s = s.masked_fill(~keep.repeat_interleave(E // G, dim=-1), 0.0)
        return s.topk(e["top_k"], dim=-1).indices


def _swiglu(y, gate, up, down):
    return _linear(F.silu(_linear(y, gate)) * _linear(y, up), down)


def moe(f, P, y):
    """The routed experts' weighted sum (dropless: every expert on every token, weighted by 0
    where not chosen, the same sum and gradients) plus the shared experts' MLP."""
    e = f["moe"]
    logits = _linear(y, P["router"])
    scores = logits.sigmoid() if e["scoring"] == "sigmoid" else logits.softmax(dim=-1)
    idx = choose(e, scores, P.get("score_bias"))
    top = scores.gather(-1, idx)
    if e["norm"]:
        top = top / (top.sum(-1, keepdim=True) + 1e-20)
    top = top * e["scaling"]
    out = torch.zeros_like(y)
    for x, (g, u, d) in enumerate(P["experts"]):
        weight = (top * (idx == x)).sum(-1, keepdim=True)
        out = out + weight * _swiglu(y, g, u, d)
    if e["shared"]:
        out = out + _swiglu(y, *P["shared"])
    return out
