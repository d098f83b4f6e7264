"""Llama 4's text model in the float64 family reference (families.py), written from Hugging Face's
Llama4ForCausalLM / Llama4TextModel (transformers' models/llama4, model_type "llama4_text"): the
features read from its config.json, its tensor names, its attention (complex-form RoPE on some
layers, a weightless L2 norm of q and k there, a position-dependent query temperature on the
others, chunked attention) and its feed-forward (dense SwiGLU, or a sigmoid-routed mixture of
experts plus a shared expert). Shares nothing with the engine.

Block (every layer, pre-norm, sequential): x += o_proj(attn(RMSNorm_in(x)));
x += feed_forward(RMSNorm_post(x)); RMSNorm is x * rsqrt(mean(x^2) + rms_norm_eps) * w, also for
model.norm; lm_head is its own matrix unless tie_word_embeddings (false by default).

Which layer does what (L layers):
  no_rope_layers[l] == 1: layer l rotates q and k ("RoPE layer"); 0: it does not ("NoPE layer").
    Absent (or empty): 1 except on every no_rope_layer_interval-th layer (interval 4: layers
    3, 7, ...).
  moe_layers: the layers whose feed_forward is the mixture; absent: every
    interleave_moe_layer_step-th layer counting from step - 1 (step 1: all; step 2: 1, 3, ...).
    The others have a dense SwiGLU of width intermediate_size_mlp.
  layer_types[l]: "chunked_attention" or "full_attention"; absent: chunked on the RoPE layers,
    full on the NoPE ones.
  transformers 4.51 read neither list for attention: it fixed both RoPE and chunking to
  (l + 1) % 4 != 0 whatever the config said; configs whose lists are that pattern (as published,
  and as family_configs.py's) read the same under every release.

Attention, per layer (H heads, KV kv heads, d = head_dim, default 128, not hidden / H):
  q, k, v = q_proj(y), k_proj(y), v_proj(y) as [B, S, heads, d] (biases only under
  attention_bias, false by default; 4.x forced it false whatever the config said);
  RoPE layers: each head's dims taken as adjacent pairs (2i, 2i + 1) = the complex number
    x_2i + i x_2i+1, multiplied by attention_factor * exp(i * pos * inv_freq_i): the pair
    rotated by angle pos * inv_freq_i. Not rotate-half's pairs (i, i + d/2). inv_freq and the
    factor come from rope_theta (default 500000) and rope_scaling (absent: plain RoPE; the
    published Scout config has llama3 scaling with factor 8, low and high frequency factors 1
    and 4, original length 8192: wavelengths past 8192 divided by 8, those between 2048 and 8192
    smoothed, the others kept);
  then, on RoPE layers under use_qk_norm (true by default), q and k each scaled to unit RMS per
    head: x * rsqrt(mean over d of x^2 + rms_norm_eps), no weight (nothing stored);
  NoPE layers under attn_temperature_tuning (true by default; 4.51's default was the truthy 4):
    q at 0-based position p multiplied by 1 + attn_scale * ln(1 + floor((p + 1) / floor_scale))
    (defaults attn_scale 0.1, floor_scale 8192: 1 for the first 8191 positions); k untouched;
  each kv head serves H / KV query heads in a row; scores = q.k * d^-0.5; causal (key j visible
  from query i only when j <= i); chunked layers also need j // attention_chunk_size ==
  i // attention_chunk_size (transformers' chunked overlay, without left padding; 4.51 built
  that mask only when the keys outnumbered the chunk, which is the same numbers); softmax;
  o_proj over the heads.

Feed-forward of a mixture layer (feed_forward.*; T tokens, E = num_local_experts, k =
num_experts_per_tok, I = intermediate_size):
  router logits = y router.weight^T (no bias), [T, E]; the k largest per token are chosen (the
  choice carries no gradient); score_e = sigmoid(logit_e) for a chosen e, 0 otherwise (the
  sigmoid of the -inf put there); not renormalised, not scaled.
  Each expert e sees its input times its score: z = score_e * y; gate|up = z gate_up_proj[e]
  (stored [E, hidden, 2I], [in, out]; gate the first I columns, up the last I: halves, not
  interleaved); out_e = (up * silu(gate)) down_proj[e] (stored [E, I, hidden]). The experts'
  outputs are summed with no further weight, plus the shared expert (shared_expert.gate_proj,
  up_proj, down_proj, a SwiGLU of width I, no bias) on every token. An expert a token did not
  choose gets input 0 and so gives 0 (no biases anywhere): running every expert on every token
  (dropless) is the same sum and the same gradients. Since silu is not linear, score times the
  input is not score times the output (features moe["weight_on"] = "output" is that control).
  The router gets its gradient through the chosen sigmoid scores only.
  No load-balancing loss: Llama4ForCausalLM's loss is the cross-entropy alone, whatever
  output_router_logits and router_aux_loss_coef say; router_jitter_noise is read by nothing.
Feed-forward of a dense layer: feed_forward.gate_proj, up_proj, down_proj, SwiGLU of width
  intermediate_size_mlp (default 16384), no bias.

Config fields: a 4.x config (rope_theta, rope_scaling) or a transformers 5 one (rope_parameters
holding rope_theta) reads the same. Absent fields take Llama4TextConfig's defaults (8 kv heads,
head_dim 128, rms_norm_eps 1e-5, attention_chunk_size 8192, 16 experts, top-1, ...). A chunked
layer with attention_chunk_size null is refused (transformers raises there too); hidden_act must
be silu.
"""
import torch
import torch.nn.functional as F

MODEL_TYPES = ("llama4_text",)


def _get(c, key, default=None):
    v = c.get(key, default)
    return default if v is None else v


def _rope(c):
    """(rope_theta, rope_scaling) of a 4.x config or a transformers 5 one (rope_parameters)."""
    if "rope_scaling" not in c and isinstance(c.get("rope_parameters"), dict):
        rp = dict(c["rope_parameters"])
        theta = rp.pop("rope_theta", None) or c.get("rope_theta") or 500000.0
        return float(theta), (None if rp.get("rope_type", rp.get("type", "default")) == "default" else rp)
    return float(_get(c, "rope_theta", 500000.0)), c.get("rope_scaling")


def layer_plan(c):
    """(no_rope_layers, moe layer indices, layer_types) of config c, as Llama4TextConfig fills them."""
    L = c["num_hidden_layers"]
    every = _get(c, "no_rope_layer_interval", 4)
    rope = list(c.get("no_rope_layers") or [int((l + 1) % every != 0) for l in range(L)])
    step = _get(c, "interleave_moe_layer_step", 1)
    moe = c["moe_layers"] if c.get("moe_layers") is not None else list(range(step - 1, L, step))
    types = c.get("layer_types") or ["chunked_attention" if r else "full_attention" for r in rope]
    return rope, moe, types


def update_features(c, f):
    """Llama 4's features over the Llama-like defaults `f` of families.features_from_hf."""
    if _get(c, "hidden_act", "silu") != "silu":
        raise ValueError("llama4_text: hidden_act %r (only silu is modelled)" % c["hidden_act"])
    a, L = c["num_attention_heads"], c["num_hidden_layers"]
    kv = c["num_key_value_heads"] if "num_key_value_heads" in c else 8
    head_dim = c["head_dim"] if "head_dim" in c else 128
    rope, moe, types = layer_plan(c)
    chunk = c["attention_chunk_size"] if "attention_chunk_size" in c else 8192
    if chunk is None and "chunked_attention" in types:
        raise ValueError("llama4_text: chunked_attention layers need attention_chunk_size")
    theta, scaling = _rope(c)
    bias = _get(c, "attention_bias", False)
    I = _get(c, "intermediate_size", 8192)
    f.update(names="llama4", kv_heads=a if kv is None else kv, head_dim=head_dim or f["hidden"] // a,
             ffn=_get(c, "intermediate_size_mlp", 16384), norm_eps=_get(c, "rms_norm_eps", 1e-5),
             positions=_get(c, "max_position_embeddings", 4096 * 32), rope_theta=theta, rope_scaling=scaling,
             qkv_bias=bias, out_bias=bias, mlp_bias=False,
             tied_embeddings=_get(c, "tie_word_embeddings", False),
             qk_norm="l2" if _get(c, "use_qk_norm", True) else "none",  # weightless, RoPE layers only
             no_rope_layers=rope, layer_types=types, attention_chunk=chunk or 0,
             rope_pairs="adjacent",  # "half": rotate_half's pairs (a control)
             attn_temperature_tuning=bool(_get(c, "attn_temperature_tuning", True)),
             floor_scale=float(_get(c, "floor_scale", 8192)), temperature_scale=float(_get(c, "attn_scale", 0.1)),
             moe=dict(experts=_get(c, "num_local_experts", 16), top_k=_get(c, "num_experts_per_tok", 1), ffn=I,
                      shared=I, sparse=[l in moe for l in range(L)], kind="llama4",
                      norm=False,  # True: the chosen scores divided by their sum (a control)
                      weight_on="input",  # "output": the score times the expert's output (a control)
                      interleaved=False,  # True: gate|up columns alternating (a control)
                      aux_coef=0.0))


def tensor_shapes(f):
    """{Hugging Face name: shape} of a Llama 4 text model's weights."""
    h, V, d, e = f["hidden"], f["vocab"], f["head_dim"], f["moe"]
    q, kv = f["heads"] * d, f["kv_heads"] * d
    s = {"model.embed_tokens.weight": (V, h)}
    for l in range(f["layers"]):
        p = "model.layers.%d." % l
        a, m = p + "self_attn.", p + "feed_forward."
        s[p + "input_layernorm.weight"], s[p + "post_attention_layernorm.weight"] = (h,), (h,)
        s[a + "q_proj.weight"], s[a + "k_proj.weight"], s[a + "v_proj.weight"] = (q, h), (kv, h), (kv, h)
        s[a + "o_proj.weight"] = (h, q)
        if f["qkv_bias"]:
            s[a + "q_proj.bias"], s[a + "k_proj.bias"], s[a + "v_proj.bias"] = (q,), (kv,), (kv,)
        if f["out_bias"]:
            s[a + "o_proj.bias"] = (h,)
        if e["sparse"][l]:
            E, I = e["experts"], e["ffn"]
            s[m + "router.weight"] = (E, h)
            s[m + "experts.gate_up_proj"], s[m + "experts.down_proj"] = (E, h, 2 * I), (E, I, h)
            mlps = [(m + "shared_expert.", e["shared"])] if e["shared"] else []
        else:
            mlps = [(m, f["ffn"])]
        for mp, width in mlps:
            s[mp + "gate_proj.weight"], s[mp + "up_proj.weight"] = (width, h), (width, h)
            s[mp + "down_proj.weight"] = (h, width)
    s["model.norm.weight"] = (h,)
    if not f["tied_embeddings"]:
        s["lm_head.weight"] = (V, h)
    return s


def layer(w, f, l):
    """Layer l's pieces, as families._layer gives them (norm slots included); a mixture layer's
    under "router", "gate_up", "down" (stacked) and "shared", a dense one's under gate, up, down."""
    p = "model.layers.%d." % l
    a, m = p + "self_attn.", p + "feed_forward."
    P = {"attn_in": (w[p + "input_layernorm.weight"], None), "attn_out": None,
         "mlp_in": (w[p + "post_attention_layernorm.weight"], None), "mlp_out": None}
    for n in ("q", "k", "v", "o"):
        P[n], P[n + "_b"] = w[a + n + "_proj.weight"], w.get(a + n + "_proj.bias")
    e = f["moe"]
    if e["sparse"][l]:
        P["router"], P["gate_up"], P["down"] = w[m + "router.weight"], w[m + "experts.gate_up_proj"], \
            w[m + "experts.down_proj"]
        if e["shared"]:
            P["shared"] = tuple(w[m + "shared_expert.%s.weight" % n] for n in ("gate_proj", "up_proj", "down_proj"))
    else:
        P["gate"], P["up"], P["down"] = (w[m + n + ".weight"] for n in ("gate_proj", "up_proj", "down_proj"))
    return P


def _linear(x, weight, bias=None):
    y = x @ weight.t()
    return y if bias is None else y + bias


def rotate(x, rope, pairs):
    """RoPE of x [B, S, heads, d] with rope_tables' (cos, sin, rd) [S, rd]: pairs (2i, 2i + 1) at
    frequency i ("adjacent", Llama 4's complex form) or (i, i + d/2) ("half", rotate_half)."""
    cos, sin, rd = rope
    c, s = cos[:, None, :], sin[:, None, :]  # [S, 1, rd]: one row per position, every head
    if pairs == "half":
        h = rd // 2
        x0, x1 = x[..., :h], x[..., h:rd]
        return torch.cat((x0 * c[..., :h] - x1 * s[..., :h], x1 * c[..., :h] + x0 * s[..., :h], x[..., rd:]), -1)
    c, s = c[..., : rd // 2], s[..., : rd // 2]  # (the tables repeat the frequencies twice)
    x0, x1 = x[..., 0:rd:2], x[..., 1:rd:2]
    out = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)
    return torch.cat((out, x[..., rd:]), -1)


def l2_norm(x, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def temperature(f, S, dtype):
    """The NoPE layers' query factor per position [S]."""
    p = torch.arange(S, dtype=torch.float64)
    return (1.0 + f["temperature_scale"] * torch.log1p(torch.floor((p + 1.0) / f["floor_scale"]))).to(dtype)


def attention(f, P, l, y, rope):
    """Attention of y [B, S, hidden] in layer l; `rope` the tables (None on a NoPE layer)."""
    B, S, _ = y.shape
    H, kv, d = f["heads"], f["kv_heads"], f["head_dim"]
    use_rope = bool(f["no_rope_layers"][l])
    q = _linear(y, P["q"], P.get("q_b")).view(B, S, H, d)
    k = _linear(y, P["k"], P.get("k_b")).view(B, S, kv, d)
    v = _linear(y, P["v"], P.get("v_b")).view(B, S, kv, d)
    if use_rope and rope is not None:
        q, k = rotate(q, rope, f["rope_pairs"]), rotate(k, rope, f["rope_pairs"])
    if use_rope and f["qk_norm"] == "l2":
        q, k = l2_norm(q, f["norm_eps"]), l2_norm(k, f["norm_eps"])
    if not use_rope and f["attn_temperature_tuning"]:
        q = q * temperature(f, S, q.dtype)[:, None, None]
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    k, v = k.repeat_interleave(H // kv, dim=1), v.repeat_interleave(H // kv, dim=1)
    scores = (q @ k.transpose(-2, -1)) * (f["attn_scale"] or d ** -0.5)
    i, j = torch.arange(S)[:, None], torch.arange(S)[None, :]
    allowed = j <= i
    chunk = f["attention_chunk"]
    if chunk and f["layer_types"][l] == "chunked_attention":
        allowed = allowed & (torch.div(i, chunk, rounding_mode="floor") == torch.div(j, chunk, rounding_mode="floor"))
    probs = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
    ctx = (probs @ v).transpose(1, 2).reshape(B, S, H * d)
    return _linear(ctx, P["o"], P.get("o_b"))


def scores(e, logits):
    """[.., E] routing scores: sigmoid of the top-k logits, 0 elsewhere (the chosen ones divided
    by their sum under norm, a control)."""
    with torch.no_grad():
        chosen = torch.zeros_like(logits).scatter(-1, logits.topk(e["top_k"], dim=-1).indices, 1.0)
    s = torch.sigmoid(logits) * chosen
    if e["norm"]:
        s = s / s.sum(-1, keepdim=True).clamp(min=1e-30)
    return s


def _expert(e, z, gate_up, down):
    gu = z @ gate_up
    if e["interleaved"]:
        gate, up = gu[..., 0::2], gu[..., 1::2]
    else:
        gate, up = gu[..., : e["ffn"]], gu[..., e["ffn"]:]
    return (up * F.silu(gate)) @ down


def moe(f, P, y):
    """The mixture's output for y [B, S, hidden]: every expert on every token (score 0 where
    not chosen), its input (or, as a control, its output) times its score, summed; plus the
    shared expert."""
    e = f["moe"]
    logits = _linear(y, P["router"])
    if "router_logits" in P:
        P["router_logits"].append(logits.reshape(-1, e["experts"]))
    s = scores(e, logits)
    out = torch.zeros_like(y)
    for x in range(e["experts"]):
        sx = s[..., x:x + 1]
        if e["weight_on"] == "input":
            out = out + _expert(e, y * sx, P["gate_up"][x], P["down"][x])
        else:
            out = out + sx * _expert(e, y, P["gate_up"][x], P["down"][x])
    if "shared" in P:
        g, u, dn = P["shared"]
        out = out + _linear(F.silu(_linear(y, g)) * _linear(y, u), dn)
    return out

