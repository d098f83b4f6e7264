"""gpt-oss in the float64 family reference (families.py), written from Hugging Face's
GptOssForCausalLM (transformers' models/gpt_oss): the features read from its config.json, its
tensor names, attention with sinks, its router and clamped-SwiGLU experts, and the optional
load-balancing loss. Shares nothing with the engine.

Block (every layer, pre-norm, sequential): x += o_proj(attn(RMSNorm(x))); x += moe(RMSNorm(x));
RMSNorm x * rsqrt(mean(x^2) + rms_norm_eps) * w everywhere (model.norm too); an untied lm_head
(tie_word_embeddings false as published; true ties it, as for every family).

Attention, per layer (H heads, KV kv heads, d = head_dim from the config, not hidden / H):
  q, k, v = q_proj(y), k_proj(y), v_proj(y), each with a bias under attention_bias (true by
  default and as published; o_proj the same); RoPE on q and k (rotate-half pairs (i, i + d/2));
  each kv head serves H / KV query heads in a row; scores = q.k * d^-0.5, causal, and on layers
  that layer_types names "sliding_attention" (default: even layers 0, 2, ...) a key j is visible
  from query i only when i - j < sliding_window (transformers' sliding_window_overlay,
  kv_idx > q_idx - sliding_window: the window holds sliding_window keys, the query's own
  included, as families.windowed() already does for Mistral, Gemma and Qwen).
  Sinks: self_attn.sinks [H], one learned logit per head, appended as one more column to every
  query's (masked) scores; the row's max is subtracted, softmax over the S + 1 columns, the
  sink's column dropped: the keys' weights sum to less than 1. The sink is never attended to
  (it has no value) but gets a gradient through the softmax's denominator.
RoPE: YaRN as published (rope_type yarn, factor 32, beta_fast 32, beta_slow 1,
  original_max_position_embeddings 4096, truncate false: the correction range is not rounded to
  whole dims; rope_theta 150000), by rope_tables.rope_parameters; cos and sin times YaRN's
  attention factor 0.1 ln(factor) + 1. Absent rope_scaling means that default; a
  transformers 5 rope_parameters object (rope_theta inside) is read the same way.
Router (mlp.router, every layer; no dense layer, no shared expert): logits = y W^T + b over
  num_local_experts; the top num_experts_per_tok logits; their softmax (over the k chosen
  only) are the weights, used as they are (no further renormalisation or scaling). That is
  softmax over all experts, top-k, renormalised: features moe["norm"] = True; False is the
  softmax over all experts with its top-k taken un-renormalised (a control).
Experts (mlp.experts, stacked): gate_up_proj [E, hidden, 2 I] (stored [in, out]) with
  gate_up_proj_bias [E, 2 I]; gate = columns 0, 2, 4, ..., up = columns 1, 3, 5, ...
  (interleaved); gate = min(gate, limit), up = clamp(up, -limit, limit) with limit =
  swiglu_limit (7.0 as published); glu = gate * sigmoid(alpha * gate), alpha = swiglu_alpha
  (1.702); out = ((up + 1) * glu) down_proj[e] + down_proj_bias[e], down_proj [E, I, hidden];
  the token's output is the routing-weighted sum over its k experts (each expert's bias too).
  Dropless: every expert runs on every token, weighted by 0 where not chosen (same sum and
  gradients).
Load-balancing loss (only when output_router_logits is true; off as published): the mean
  cross-entropy plus router_aux_loss_coef * E * sum_e f_e P_e, over every layer's tokens
  together (T = layers x batch x seq rows): p = softmax over all E experts of each row's raw
  router logits; f_e = (number of rows whose top-k of p holds e) / T, so sum_e f_e = k; P_e =
  the mean of p[e] over the rows. The raw logits are what transformers records now (its router
  returns (logits, top-k weights, indices) and index 0 is kept); the choice gets no gradient,
  P does.
Config fields: swiglu_limit and swiglu_alpha are read from the config (the newest GptOssConfig
documents both as the experts' clamp and gain; earlier GptOssExperts fixed 7.0 and 1.702
whatever the config said: the published values, so published configs read the same under
both). Absent fields take GptOssConfig's defaults: head_dim 64, 8 kv heads, rms_norm_eps 1e-5,
sliding_window 128, rope_theta 150000, the YaRN above, attention_bias true, layer_types
alternating from "sliding_attention".
"""
import torch

from rope_tables import apply_rope

MODEL_TYPES = ("gpt_oss",)
# GptOssConfig's defaults for fields absent from a config.json.
DEFAULT_YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                "original_max_position_embeddings": 4096}


def _get(c, key, default=None):
    v = c.get(key, default)
    return default if v is None else v


def _rope(c):
    """(rope_theta, rope_scaling) of a 4.x config (rope_theta, rope_scaling) or a 5.x one
    (rope_parameters holding rope_theta)."""
    if "rope_scaling" not in c and isinstance(c.get("rope_parameters"), dict):
        rp = dict(c["rope_parameters"])
        theta = rp.pop("rope_theta", 150000.0)
        return float(theta), (None if rp.get("rope_type", "default") == "default" else rp)
    return float(_get(c, "rope_theta", 150000.0)), c["rope_scaling"] if "rope_scaling" in c else dict(DEFAULT_YARN)


def update_features(c, f):
    """gpt-oss's features over the Llama-like defaults `f` of families.features_from_hf."""
    a, L = c["num_attention_heads"], c["num_hidden_layers"]
    kv = c["num_key_value_heads"] if "num_key_value_heads" in c else 8
    head_dim = c["head_dim"] if "head_dim" in c else 64
    theta, scaling = _rope(c)
    bias = _get(c, "attention_bias", True)
    types = c.get("layer_types") or ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(L)]
    aux = bool(_get(c, "output_router_logits", False))
    if aux and c.get("router_aux_loss_coef") is None:
        raise ValueError("gpt_oss: output_router_logits needs router_aux_loss_coef (the default changed, 0.9 to 0.001)")
    f.update(names="gpt_oss", kv_heads=a if kv is None else kv, head_dim=head_dim or f["hidden"] // a,
             norm_eps=_get(c, "rms_norm_eps", 1e-5), rope_theta=theta, rope_scaling=scaling,
             qkv_bias=bias, out_bias=bias, mlp_bias=True, sliding_window=_get(c, "sliding_window", 0),
             layer_types=types, sinks=True,
             moe=dict(experts=_get(c, "num_local_experts", 128), top_k=_get(c, "num_experts_per_tok", 4),
                      ffn=c["intermediate_size"], norm=True, shared=0, sparse=[True] * L, kind="gpt_oss",
                      router_bias=True, interleaved=True, limit=float(_get(c, "swiglu_limit", 7.0)),
                      alpha=float(_get(c, "swiglu_alpha", 1.702)),
                      aux_coef=float(c["router_aux_loss_coef"]) if aux else 0.0))


def moe_shapes(f, p):
    """{Hugging Face name: shape} of layer prefix p's router and experts (the experts dequantized:
    the published checkpoint stores gate_up_proj and down_proj as MXFP4 *_blocks / *_scales);
    the rest of the model has families.tensor_shapes' generic names (with the sinks)."""
    h, e = f["hidden"], f["moe"]
    E, I, m = e["experts"], e["ffn"], p + "mlp."
    s = {m + "router.weight": (E, h)}
    if e["router_bias"]:
        s[m + "router.bias"] = (E,)
    s[m + "experts.gate_up_proj"], s[m + "experts.gate_up_proj_bias"] = (E, h, 2 * I), (E, 2 * I)
    s[m + "experts.down_proj"], s[m + "experts.down_proj_bias"] = (E, I, h), (E, h)
    return s


def layer(w, f, l):
    """Layer l's pieces, as families._layer gives them (norm slots included)."""
    p = "model.layers.%d." % l
    a, m = p + "self_attn.", p + "mlp."
    P = {"attn_in": (w[p + "input_layernorm.weight"], None), "attn_out": None,
         "mlp_in": (w[p + "post_attention_layernorm.weight"], None), "mlp_out": None}
    for n in ("q", "k", "v", "o"):
        P[n], P[n + "_b"] = w[a + n + "_proj.weight"], w.get(a + n + "_proj.bias")
    P["sinks"] = w.get(a + "sinks")
    P["router"], P["router_b"] = w[m + "router.weight"], w.get(m + "router.bias")
    P["gate_up"], P["gate_up_b"] = w[m + "experts.gate_up_proj"], w[m + "experts.gate_up_proj_bias"]
    P["down"], P["down_b"] = w[m + "experts.down_proj"], w[m + "experts.down_proj_bias"]
    return P


def _linear(x, weight, bias=None):
    y = x @ weight.t()
    return y if bias is None else y + bias


def attention(f, P, y, rope, window):
    """Attention of y [B, S, hidden] with the layer's sinks (when f["sinks"]); `window` > 0
    limits query i to keys j with i - j < window."""
    B, S, _ = y.shape
    H, kv, d = f["heads"], f["kv_heads"], f["head_dim"]
    q = _linear(y, P["q"], P.get("q_b")).view(B, S, H, d).transpose(1, 2)
    k = _linear(y, P["k"], P.get("k_b")).view(B, S, kv, d).transpose(1, 2)
    v = _linear(y, P["v"], P.get("v_b")).view(B, S, kv, d).transpose(1, 2)
    if rope is not None:
        q, k = apply_rope(q, *rope), apply_rope(k, *rope)
    k, v = k.repeat_interleave(H // kv, dim=1), v.repeat_interleave(H // kv, dim=1)
    scores = (q @ k.transpose(-2, -1)) * (f["attn_scale"] or d ** -0.5)
    i, j = torch.arange(S)[:, None], torch.arange(S)[None, :]
    allowed = j <= i
    if window:
        allowed = allowed & (i - j < window)
    scores = scores.masked_fill(~allowed, float("-inf"))
    if f["sinks"]:
        sink = P["sinks"].view(1, H, 1, 1).expand(B, H, S, 1)
        logits = torch.cat((scores, sink), dim=-1)
        logits = logits - logits.max(dim=-1, keepdim=True).values
        probs = logits.softmax(dim=-1)[..., :-1]
    else:
        probs = scores.softmax(dim=-1)
    ctx = (probs @ v).transpose(1, 2).reshape(B, S, H * d)
    return _linear(ctx, P["o"], P.get("o_b"))


def route(e, logits):
    """(weights [.., k], indices [.., k]) of router logits: softmax over the top-k logits
    (norm), or the top-k of the softmax over all experts (not norm)."""
    if e["norm"]:
        top, idx = logits.topk(e["top_k"], dim=-1)
        return top.softmax(dim=-1), idx
    return logits.softmax(dim=-1).topk(e["top_k"], dim=-1)


def expert(e, y, gate_up, gate_up_b, down, down_b):
    """One expert's clamped SwiGLU of y [.., hidden] (gate_up [hidden, 2I], down [I, hidden])."""
    gu = y @ gate_up + gate_up_b
    if e["interleaved"]:
        gate, up = gu[..., 0::2], gu[..., 1::2]
    else:  # contiguous halves (a control)
        gate, up = gu[..., : e["ffn"]], gu[..., e["ffn"]:]
    if e["limit"] is not None:  # (None: no clamp, a control)
        gate, up = gate.clamp(max=e["limit"]), up.clamp(min=-e["limit"], max=e["limit"])
    glu = gate * torch.sigmoid(gate * e["alpha"])
    return ((up + 1) * glu) @ down + down_b


def moe(f, P, y):
    """The routed experts' weighted sum of y [B, S, hidden]; the raw router logits [B * S, E]
    are appended to P["router_logits"] when forward collects them (the load-balancing loss)."""
    e = f["moe"]
    logits = _linear(y, P["router"], P["router_b"] if e["router_bias"] else None)
    if "router_logits" in P:
        P["router_logits"].append(logits.reshape(-1, e["experts"]))
    weights, idx = route(e, logits)
    out = torch.zeros_like(y)
    for x in range(e["experts"]):
        wx = (weights * (idx == x)).sum(-1, keepdim=True)
        out = out + wx * expert(e, y, P["gate_up"][x], P["gate_up_b"][x], P["down"][x], P["down_b"][x])
    return out


def load_balancing(e, router_logits):
    """E * sum over experts of (fraction of top-k choices per slot, [k, E]) x (mean routing
    probability [E]), over every layer's tokens together (Switch Transformer's loss as
    transformers writes it: top-k of the softmax over all experts)."""
    probs = torch.cat(router_logits, dim=0).softmax(dim=-1)
    with torch.no_grad():
        chosen = torch.nn.functional.one_hot(probs.topk(e["top_k"], dim=-1).indices, e["experts"])
        tokens_per_expert = chosen.to(probs.dtype).mean(dim=0)
    return (tokens_per_expert * probs.mean(dim=0).unsqueeze(0)).sum() * e["experts"]
