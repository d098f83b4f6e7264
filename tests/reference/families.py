#!/usr/bin/python3
"""A PyTorch reference of every model family's training step, written from the published
architectures (no transformers library), to check RematLab from outside.

One generic decoder-only transformer, parameterised by the model features of
docs/model-config.md (norm kind and placement, positions, head_dim, GQA, biases, qk_norm (none,
projection or head), sliding window, attention scale and softcaps, MLP kind, tied embeddings,
embed_scale), reading its weights under each family's Hugging Face tensor names; the mixtures of
experts are in mixtures.py, DeepSeek's multi-head latent attention and routers in deepseek.py,
gpt-oss's attention sinks, router, clamped experts and load-balancing loss in gpt_oss.py, Llama 4's
chunked attention, NoPE layers, L2 QK-norm, temperature and sigmoid-routed experts in llama4.py.
`FAMILIES` (family_configs.py) holds a tiny Hugging Face config.json per family;
`features_from_hf` reads one the way Hugging Face's model classes do; `rope_parameters`
computes the RoPE inverse frequencies and attention factor from Hugging Face's formulas
(default, linear, dynamic, llama3, yarn, longrope); `train` runs AdamW steps
(torch.optim.AdamW, decay on matrices only, as docs/batch.md) in a chosen dtype.

Debian's python3-torch and python3-numpy only. tests/e2e/families_e2e.py drives it against
rematlab-batch; families_checks.py checks it against itself.

Usage: /usr/bin/python3 families.py OUT_DIR   (writes each family's config.json,
weights.safetensors and tokens.npy under OUT_DIR/FAMILY)
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deepseek  # noqa: E402
import gpt_oss  # noqa: E402
import llama4  # noqa: E402
import mixtures  # noqa: E402
from make_reference import write_safetensors  # noqa: E402
from rope_tables import apply_rope, rope_parameters, rope_tables, rotate_half  # noqa: E402,F401
from family_configs import BATCH, FAMILIES, SEQ  # noqa: E402,F401


def _get(c, key, default=None):
    v = c.get(key, default)
    return default if v is None else v


def features_from_hf(c):
    """The features (docs/model-config.md names) of a Hugging Face config, as its model class
    reads it; `names` is the family whose tensor names the weights carry."""
    t = c["model_type"]
    if t in ("falcon", "RefinedWeb", "RefinedWebModel"):
        return _falcon_features(c, t)
    if t == "gpt_neox":
        h, a = c["hidden_size"], c["num_attention_heads"]
        return dict(names="gpt_neox", layers=c["num_hidden_layers"], hidden=h, heads=a, kv_heads=a,
                    head_dim=h // a, ffn=c["intermediate_size"], vocab=c["vocab_size"],
                    positions=c["max_position_embeddings"], norm="layernorm",
                    norm_eps=_get(c, "layer_norm_eps", 1e-5), norm_unit_offset=False, norm_placement="pre",
                    block_layout="parallel" if _get(c, "use_parallel_residual", True) else "sequential",
                    position="rope", rope_theta=_get(c, "rotary_emb_base", 10000.0), rope_scaling=None,
                    partial_rotary_factor=_get(c, "rotary_pct", 0.25), original_max_position_embeddings=None,
                    qkv_bias=_get(c, "attention_bias", True), out_bias=_get(c, "attention_bias", True),
                    mlp_bias=True, qk_norm="none", sliding_window=0, sliding_window_layers="all",
                    attn_scale=0.0, attn_scale_inverse_layer=False, attn_softcap=0.0, final_softcap=0.0,
                    mlp="gelu" if _get(c, "hidden_act", "gelu") == "gelu" else "gelu_tanh",
                    tied_embeddings=_get(c, "tie_word_embeddings", False), embed_scale=False,
                    embedding_multiplier=1.0, residual_multiplier=1.0, logits_scaling=1.0)
    if t == "gpt2":
        h, a = c["n_embd"], c["n_head"]
        return dict(names="gpt2", layers=c["n_layer"], hidden=h, heads=a, kv_heads=a, head_dim=h // a,
                    ffn=_get(c, "n_inner", 4 * h), vocab=c["vocab_size"], positions=c["n_positions"],
                    norm="layernorm", norm_eps=c["layer_norm_epsilon"], norm_unit_offset=False,
                    norm_placement="pre", position="learned", rope_theta=0.0, rope_scaling=None,
                    partial_rotary_factor=1.0, original_max_position_embeddings=None,
                    qkv_bias=True, out_bias=True, mlp_bias=True, qk_norm="none",
                    sliding_window=0, sliding_window_layers="all",
                    attn_scale=0.0 if _get(c, "scale_attn_weights", True) else 1.0,
                    attn_scale_inverse_layer=_get(c, "scale_attn_by_inverse_layer_idx", False),
                    attn_softcap=0.0, final_softcap=0.0,
                    mlp="gelu" if c.get("activation_function") == "gelu" else "gelu_tanh",
                    tied_embeddings=True, embed_scale=False, block_layout="sequential", embedding_multiplier=1.0,
                    residual_multiplier=1.0, logits_scaling=1.0)
    h, a = c["hidden_size"], c["num_attention_heads"]
    f = dict(names=t if t in ("phi3", "olmo2", "gemma2") else "llama", layers=c["num_hidden_layers"],
             hidden=h, heads=a, kv_heads=_get(c, "num_key_value_heads", a),
             head_dim=_get(c, "head_dim", h // a), ffn=c["intermediate_size"], vocab=c["vocab_size"],
             positions=c["max_position_embeddings"], norm="rmsnorm", norm_eps=_get(c, "rms_norm_eps", 1e-6),
             norm_unit_offset=False, norm_placement="pre", position="rope",
             rope_theta=_get(c, "rope_theta", 10000.0), rope_scaling=c.get("rope_scaling"),
             partial_rotary_factor=_get(c, "partial_rotary_factor", 1.0),
             original_max_position_embeddings=c.get("original_max_position_embeddings"),
             qkv_bias=_get(c, "attention_bias", False), out_bias=_get(c, "attention_bias", False),
             mlp_bias=_get(c, "mlp_bias", False), qk_norm="none", sliding_window=0,
             sliding_window_layers="all", attn_scale=0.0, attn_scale_inverse_layer=False,
             attn_softcap=0.0, final_softcap=0.0, mlp="swiglu",
             tied_embeddings=_get(c, "tie_word_embeddings", False), embed_scale=False,
             block_layout="sequential", embedding_multiplier=1.0, residual_multiplier=1.0, logits_scaling=1.0)
    if t in ("mistral", "phi3"):
        f["sliding_window"] = _get(c, "sliding_window", 0)
    elif t == "qwen2":
        f["qkv_bias"], f["out_bias"] = True, False
        _qwen_window(c, f)
    elif t in ("gemma", "gemma2", "gemma3_text"):
        f.update(norm_unit_offset=True, mlp="geglu", embed_scale=True,
                 tied_embeddings=_get(c, "tie_word_embeddings", True))
        if t == "gemma3_text":
            f.update(names="gemma2", norm_placement="sandwich", qk_norm="head",
                     sliding_window=_get(c, "sliding_window", 0), sliding_window_layers="all",
                     sliding_window_pattern=_get(c, "sliding_window_pattern", 6),
                     layer_types=c.get("layer_types"),
                     rope_local_theta=_get(c, "rope_local_base_freq", 10000.0),
                     attn_scale=c["query_pre_attn_scalar"] ** -0.5,
                     attn_softcap=_get(c, "attn_logit_softcapping", 0.0),
                     final_softcap=_get(c, "final_logit_softcapping", 0.0))
        if t == "gemma2":
            f.update(norm_placement="sandwich", sliding_window=_get(c, "sliding_window", 0),
                     sliding_window_layers="even", attn_scale=c["query_pre_attn_scalar"] ** -0.5,
                     attn_softcap=_get(c, "attn_logit_softcapping", 0.0),
                     final_softcap=_get(c, "final_logit_softcapping", 0.0))
    elif t == "olmo2":
        f.update(norm_placement="post", qk_norm="projection")
    elif t == "granite":
        f.update(attn_scale=_get(c, "attention_multiplier", 1.0),
                 embedding_multiplier=_get(c, "embedding_multiplier", 1.0),
                 residual_multiplier=_get(c, "residual_multiplier", 1.0),
                 logits_scaling=_get(c, "logits_scaling", 1.0))
    elif t == "qwen3":
        f["qk_norm"] = "head"
        _qwen_window(c, f)
    elif t in ("mixtral", "qwen3_moe", "qwen2_moe"):
        # Layer l sparse unless in mlp_only_layers, where (l + 1) % decoder_sparse_step == 0.
        mixtral = t == "mixtral"
        step, dense = _get(c, "decoder_sparse_step", 1), _get(c, "mlp_only_layers", [])
        f.update(names=t, qk_norm="head" if t == "qwen3_moe" else "none",
                 sliding_window=_get(c, "sliding_window", 0) if mixtral else 0,
                 qkv_bias=True if t == "qwen2_moe" else f["qkv_bias"],
                 moe=dict(experts=c["num_local_experts" if mixtral else "num_experts"], top_k=c["num_experts_per_tok"],
                          ffn=c["intermediate_size"] if mixtral else c["moe_intermediate_size"],
                          norm=True if mixtral else _get(c, "norm_topk_prob", False),
                          shared=_get(c, "shared_expert_intermediate_size", 0) if t == "qwen2_moe" else 0,
                          sparse=[l not in dense and (l + 1) % step == 0 for l in range(f["layers"])],
                          # the load-balancing loss, added only under output_router_logits
                          aux_coef=float(_get(c, "router_aux_loss_coef", 0.001))
                          if _get(c, "output_router_logits", False) else 0.0))
    elif t in deepseek.MODEL_TYPES:
        deepseek.update_features(c, f)
    elif t in gpt_oss.MODEL_TYPES:
        gpt_oss.update_features(c, f)
    elif t in llama4.MODEL_TYPES:
        llama4.update_features(c, f)
    elif t == "smollm3":
        # transformers' default list: the layers l with (l + 1) % interval == 0 go without RoPE.
        every = _get(c, "no_rope_layer_interval", 4)
        f.update(tied_embeddings=_get(c, "tie_word_embeddings", True),
                 no_rope_layers=c.get("no_rope_layers") or [int((l + 1) % every != 0) for l in range(f["layers"])])
    return f


def _qwen_window(c, f):
    """Qwen2's and Qwen3's window, read while use_sliding_window is true: on the layers from
    max_window_layers on (transformers' layer_types: sliding where i >= max_window_layers)."""
    if _get(c, "use_sliding_window", False) and _get(c, "sliding_window", 0):
        f["sliding_window"] = c["sliding_window"]
        start = _get(c, "max_window_layers", 28)
        f["layer_types"] = c.get("layer_types") or ["sliding_attention" if i >= start else "full_attention"
                                                    for i in range(c["num_hidden_layers"])]


def _falcon_features(c, t):
    """Falcon (FalconConfig; RefinedWeb's n_layer, n_head, n_head_kv): kv heads and the block
    layout from multi_query, new_decoder_architecture, parallel_attn and num_ln_in_parallel_attn."""
    h = c["hidden_size"]
    a = c.get("num_attention_heads", c.get("n_head"))
    new_arch = _get(c, "new_decoder_architecture", t == "RefinedWeb")
    if new_arch:
        kv = _get(c, "num_kv_heads", _get(c, "n_head_kv", a))
        layout = "parallel_shared_norm" if _get(c, "num_ln_in_parallel_attn", 2) == 1 else "parallel"
    else:
        kv = 1 if _get(c, "multi_query", True) else a
        layout = "parallel_shared_norm" if _get(c, "parallel_attn", True) else "sequential"
    bias = _get(c, "bias", False)
    return dict(names="falcon", layers=c.get("num_hidden_layers", c.get("n_layer")), hidden=h, heads=a,
                kv_heads=kv, head_dim=h // a, ffn=_get(c, "ffn_hidden_size", 4 * h), vocab=c["vocab_size"],
                positions=_get(c, "max_position_embeddings", 2048), norm="layernorm",
                norm_eps=_get(c, "layer_norm_epsilon", 1e-5), norm_unit_offset=False, norm_placement="pre",
                block_layout=layout, position="rope", rope_theta=_get(c, "rope_theta", 10000.0),
                rope_scaling=c.get("rope_scaling"), partial_rotary_factor=1.0,
                original_max_position_embeddings=None, qkv_bias=bias, out_bias=bias, mlp_bias=bias,
                qk_norm="none", sliding_window=0, sliding_window_layers="all", attn_scale=0.0,
                attn_scale_inverse_layer=False, attn_softcap=0.0, final_softcap=0.0, mlp="gelu",
                tied_embeddings=_get(c, "tie_word_embeddings", True), embed_scale=False,
                embedding_multiplier=1.0, residual_multiplier=1.0, logits_scaling=1.0)


# ---------------------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------------------
# Tensor names and the layer's pieces under them.

def _norm_names(f):
    """Per layer: the HF norm under each slot (attn_in, attn_out, mlp_in, mlp_out), None where the
    placement has none."""
    if f["names"] == "gpt2":
        return {"attn_in": "ln_1", "attn_out": None, "mlp_in": "ln_2", "mlp_out": None}
    place = f["norm_placement"]
    if place == "pre":
        return {"attn_in": "input_layernorm", "attn_out": None,
                "mlp_in": "post_attention_layernorm", "mlp_out": None}
    if place == "post":
        return {"attn_in": None, "attn_out": "post_attention_layernorm",
                "mlp_in": None, "mlp_out": "post_feedforward_layernorm"}
    return {"attn_in": "input_layernorm", "attn_out": "post_attention_layernorm",
            "mlp_in": "pre_feedforward_layernorm", "mlp_out": "post_feedforward_layernorm"}


def tensor_shapes(f):
    """{Hugging Face name: shape} of the family's weights (GPT-2's Conv1D stored [in, out])."""
    h, ff, V = f["hidden"], f["ffn"], f["vocab"]
    q, kv = f["heads"] * f["head_dim"], f["kv_heads"] * f["head_dim"]
    ln = f["norm"] == "layernorm"
    s = {}
    if f["names"] == "gpt2":
        s["transformer.wte.weight"] = (V, h)
        s["transformer.wpe.weight"] = (f["positions"], h)
        for l in range(f["layers"]):
            p = "transformer.h.%d." % l
            for n in ("ln_1", "ln_2"):
                s[p + n + ".weight"], s[p + n + ".bias"] = (h,), (h,)
            s[p + "attn.c_attn.weight"], s[p + "attn.c_attn.bias"] = (h, q + 2 * kv), (q + 2 * kv,)
            s[p + "attn.c_proj.weight"], s[p + "attn.c_proj.bias"] = (q, h), (h,)
            s[p + "mlp.c_fc.weight"], s[p + "mlp.c_fc.bias"] = (h, ff), (ff,)
            s[p + "mlp.c_proj.weight"], s[p + "mlp.c_proj.bias"] = (ff, h), (h,)
        s["transformer.ln_f.weight"], s["transformer.ln_f.bias"] = (h,), (h,)
        return s
    if f["names"] == "gpt_neox":
        return _neox_shapes(f)
    if f["names"] == "falcon":
        return _falcon_shapes(f)
    if f["names"] in ("deepseek", "llama4"):
        return (deepseek if f["names"] == "deepseek" else llama4).tensor_shapes(f)
    s["model.embed_tokens.weight"] = (V, h)
    for l in range(f["layers"]):
        p = "model.layers.%d." % l
        for n in _norm_names(f).values():
            if n:
                s[p + n + ".weight"] = (h,)
                if ln:
                    s[p + n + ".bias"] = (h,)
        a = p + "self_attn."
        if f["names"] == "phi3":
            s[a + "qkv_proj.weight"] = (q + 2 * kv, h)
        else:
            s[a + "q_proj.weight"], s[a + "k_proj.weight"], s[a + "v_proj.weight"] = (q, h), (kv, h), (kv, h)
            if f["qkv_bias"]:
                s[a + "q_proj.bias"], s[a + "k_proj.bias"], s[a + "v_proj.bias"] = (q,), (kv,), (kv,)
        s[a + "o_proj.weight"] = (h, q)
        if f["out_bias"]:
            s[a + "o_proj.bias"] = (h,)
        if f.get("sinks"):
            s[a + "sinks"] = (f["heads"],)
        if f["qk_norm"] == "projection":
            s[a + "q_norm.weight"], s[a + "k_norm.weight"] = (q,), (kv,)
        elif f["qk_norm"] == "head":
            s[a + "q_norm.weight"], s[a + "k_norm.weight"] = (f["head_dim"],), (f["head_dim"],)
        m = p + "mlp."
        if f.get("moe") and f["moe"]["sparse"][l]:
            s.update(mixtures.tensor_shapes(f, p))
            continue
        if f["names"] == "phi3":
            s[m + "gate_up_proj.weight"] = (2 * ff, h)
        else:
            s[m + "gate_proj.weight"], s[m + "up_proj.weight"] = (ff, h), (ff, h)
        s[m + "down_proj.weight"] = (h, ff)
        if f["mlp_bias"]:
            for n, r in (("gate_proj", ff), ("up_proj", ff), ("down_proj", h)):
                s[m + n + ".bias"] = (r,)
    s["model.norm.weight"] = (h,)
    if ln:
        s["model.norm.bias"] = (h,)
    if not f["tied_embeddings"]:
        s["lm_head.weight"] = (V, h)
    return s


def _neox_shapes(f):
    """GPT-NeoX's names: query_key_value fused per head as [q, k, v], biases everywhere."""
    h, ff, V, qkv = f["hidden"], f["ffn"], f["vocab"], 3 * f["heads"] * f["head_dim"]
    s = {"gpt_neox.embed_in.weight": (V, h)}
    for l in range(f["layers"]):
        p = "gpt_neox.layers.%d." % l
        for n in ("input_layernorm", "post_attention_layernorm"):
            s[p + n + ".weight"], s[p + n + ".bias"] = (h,), (h,)
        s[p + "attention.query_key_value.weight"], s[p + "attention.query_key_value.bias"] = (qkv, h), (qkv,)
        s[p + "attention.dense.weight"], s[p + "attention.dense.bias"] = (h, h), (h,)
        s[p + "mlp.dense_h_to_4h.weight"], s[p + "mlp.dense_h_to_4h.bias"] = (ff, h), (ff,)
        s[p + "mlp.dense_4h_to_h.weight"], s[p + "mlp.dense_4h_to_h.bias"] = (h, ff), (h,)
    s["gpt_neox.final_layer_norm.weight"], s["gpt_neox.final_layer_norm.bias"] = (h,), (h,)
    if not f["tied_embeddings"]:
        s["embed_out.weight"] = (V, h)
    return s


def _falcon_norms(f):
    """Falcon's norm names per layout: (attention's, MLP's or None when shared)."""
    return {"parallel": ("ln_attn", "ln_mlp"), "parallel_shared_norm": ("input_layernorm", None),
            "sequential": ("input_layernorm", "post_attention_layernorm")}[f["block_layout"]]


def _falcon_shapes(f):
    """Falcon's names: query_key_value by kv group (a group's q heads, then its k and v)."""
    h, ff, V = f["hidden"], f["ffn"], f["vocab"]
    qkv = (f["heads"] + 2 * f["kv_heads"]) * f["head_dim"]
    s = {"transformer.word_embeddings.weight": (V, h)}
    for l in range(f["layers"]):
        p = "transformer.h.%d." % l
        for n in _falcon_norms(f):
            if n:
                s[p + n + ".weight"], s[p + n + ".bias"] = (h,), (h,)
        mats = (("self_attention.query_key_value", (qkv, h)), ("self_attention.dense", (h, h)),
                ("mlp.dense_h_to_4h", (ff, h)), ("mlp.dense_4h_to_h", (h, ff)))
        for n, shape in mats:
            s[p + n + ".weight"] = shape
            if f["qkv_bias"]:
                s[p + n + ".bias"] = (shape[0],)
    s["transformer.ln_f.weight"], s["transformer.ln_f.bias"] = (h,), (h,)
    if not f["tied_embeddings"]:
        s["lm_head.weight"] = (V, h)
    return s


def is_norm_weight(name):
    return name.endswith("norm.weight") or name.endswith("layernorm.weight") or ".ln_" in name


def make_weights(f, seed):
    """Random weights under the family's names: matrices (stacked ones too) N(0, 0.2²), biases
    (stacked ones too) and other vectors N(0, 0.1²), norm weights near their identity (1, or 0
    under a unit offset). float32, as they are stored."""
    gen = torch.Generator().manual_seed(seed)
    w = {}
    for name, shape in tensor_shapes(f).items():
        r = torch.randn(*shape, generator=gen)
        if len(shape) >= 2 and not name.endswith("bias"):
            w[name] = r * 0.2
        elif is_norm_weight(name) and name.endswith(".weight"):
            w[name] = r * 0.1 + (0.0 if f["norm_unit_offset"] else 1.0)
        else:
            w[name] = r * 0.1
    return w


def _layer(w, f, l):
    """The layer's q, k, v, o (and biases), MLP matrices and norms, as [out, in] views of `w`."""
    q, kv, h = f["heads"] * f["head_dim"], f["kv_heads"] * f["head_dim"], f["hidden"]
    P = {}
    if f["names"] in ("deepseek", "gpt_oss", "llama4"):
        return {"deepseek": deepseek, "gpt_oss": gpt_oss, "llama4": llama4}[f["names"]].layer(w, f, l)
    if f["names"] == "gpt_neox":
        p = "gpt_neox.layers.%d." % l
        a, d = f["heads"], f["head_dim"]
        qkv = w[p + "attention.query_key_value.weight"].view(a, 3, d, h)
        qkv_b = w[p + "attention.query_key_value.bias"].view(a, 3, d)
        for i, n in enumerate(("q", "k", "v")):
            P[n], P[n + "_b"] = qkv[:, i].reshape(a * d, h), qkv_b[:, i].reshape(a * d)
        P["o"], P["o_b"] = w[p + "attention.dense.weight"], w[p + "attention.dense.bias"]
        P["fc"], P["fc_b"] = w[p + "mlp.dense_h_to_4h.weight"], w[p + "mlp.dense_h_to_4h.bias"]
        P["down"], P["down_b"] = w[p + "mlp.dense_4h_to_h.weight"], w[p + "mlp.dense_4h_to_h.bias"]
        P["attn_in"] = (w[p + "input_layernorm.weight"], w[p + "input_layernorm.bias"])
        P["mlp_in"] = (w[p + "post_attention_layernorm.weight"], w[p + "post_attention_layernorm.bias"])
        P["attn_out"] = P["mlp_out"] = None
        return P
    if f["names"] == "falcon":
        p = "transformer.h.%d." % l
        kvh, d = f["kv_heads"], f["head_dim"]
        rep = f["heads"] // kvh
        qkv = w[p + "self_attention.query_key_value.weight"].view(kvh, rep + 2, d, h)
        P["q"], P["k"], P["v"] = qkv[:, :rep].reshape(q, h), qkv[:, rep].reshape(kv, h), qkv[:, rep + 1].reshape(kv, h)
        bias = w.get(p + "self_attention.query_key_value.bias")
        if bias is not None:
            bias = bias.view(kvh, rep + 2, d)
            P["q_b"], P["k_b"], P["v_b"] = bias[:, :rep].reshape(q), bias[:, rep].reshape(kv), bias[:, rep + 1].reshape(kv)
        for key, n in (("o", "self_attention.dense"), ("fc", "mlp.dense_h_to_4h"), ("down", "mlp.dense_4h_to_h")):
            P[key], P[key + "_b"] = w[p + n + ".weight"], w.get(p + n + ".bias")
        ln_a, ln_m = _falcon_norms(f)
        P["attn_in"] = (w[p + ln_a + ".weight"], w[p + ln_a + ".bias"])
        P["mlp_in"] = (w[p + ln_m + ".weight"], w[p + ln_m + ".bias"]) if ln_m else None
        P["attn_out"] = P["mlp_out"] = None
        return P
    if f["names"] == "gpt2":
        p = "transformer.h.%d." % l
        cw, cb = w[p + "attn.c_attn.weight"].t(), w[p + "attn.c_attn.bias"]
        P["q"], P["k"], P["v"] = cw[:q], cw[q:q + kv], cw[q + kv:]
        P["q_b"], P["k_b"], P["v_b"] = cb[:q], cb[q:q + kv], cb[q + kv:]
        P["o"], P["o_b"] = w[p + "attn.c_proj.weight"].t(), w[p + "attn.c_proj.bias"]
        P["fc"], P["fc_b"] = w[p + "mlp.c_fc.weight"].t(), w[p + "mlp.c_fc.bias"]
        P["down"], P["down_b"] = w[p + "mlp.c_proj.weight"].t(), w[p + "mlp.c_proj.bias"]
    else:
        p = "model.layers.%d." % l
        a, m = p + "self_attn.", p + "mlp."
        if f["names"] == "phi3":
            qkv = w[a + "qkv_proj.weight"]
            P["q"], P["k"], P["v"] = qkv[:q], qkv[q:q + kv], qkv[q + kv:]
            gu = w[m + "gate_up_proj.weight"]
            P["gate"], P["up"] = gu[:f["ffn"]], gu[f["ffn"]:]
            P["down"] = w[m + "down_proj.weight"]
        else:
            for n in ("q", "k", "v"):
                P[n] = w[a + n + "_proj.weight"]
                P[n + "_b"] = w.get(a + n + "_proj.bias")
            if f.get("moe") and f["moe"]["sparse"][l]:
                mixtures.layer(w, f, p, P)
            else:
                P["gate"], P["up"] = w[m + "gate_proj.weight"], w[m + "up_proj.weight"]
                P["gate_b"], P["up_b"] = w.get(m + "gate_proj.bias"), w.get(m + "up_proj.bias")
                P["down"], P["down_b"] = w[m + "down_proj.weight"], w.get(m + "down_proj.bias")
        P["o"], P["o_b"] = w[a + "o_proj.weight"], w.get(a + "o_proj.bias")
        P["q_norm"], P["k_norm"] = w.get(a + "q_norm.weight"), w.get(a + "k_norm.weight")
    for slot, n in _norm_names(f).items():
        P[slot] = None if n is None else (w[p + n + ".weight"], w.get(p + n + ".bias"))
    assert h == P["o"].shape[0]
    return P


# ---------------------------------------------------------------------------------------------
# The forward pass.

def norm(f, x, weight, bias=None):
    if f["norm"] == "layernorm":
        return F.layer_norm(x, (x.shape[-1],), weight, bias, f["norm_eps"])
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + f["norm_eps"])
    return y * (1.0 + weight if f["norm_unit_offset"] else weight)


def linear(x, weight, bias=None):
    y = x @ weight.t()
    return y if bias is None else y + bias


def softcap(x, cap):
    return cap * torch.tanh(x / cap) if cap else x


def attention(f, P, l, y, rope):
    if f.get("mla"):  # DeepSeek's multi-head latent attention
        return deepseek.attention(f, P, y, rope)
    if f["names"] == "gpt_oss":  # attention with sinks
        return gpt_oss.attention(f, P, y, rope, f["sliding_window"] if windowed(f, l) else 0)
    if f["names"] == "llama4":  # RoPE or NoPE per layer, chunks, L2 QK-norm, temperature
        return llama4.attention(f, P, l, y, rope)
    B, S, _ = y.shape
    a, kv, d = f["heads"], f["kv_heads"], f["head_dim"]
    q, k, v = linear(y, P["q"], P.get("q_b")), linear(y, P["k"], P.get("k_b")), linear(y, P["v"], P.get("v_b"))
    if f["qk_norm"] == "projection":  # over the whole projections
        q, k = norm(f, q, P["q_norm"]), norm(f, k, P["k_norm"])
    q, k = q.view(B, S, a, d), k.view(B, S, kv, d)
    if f["qk_norm"] == "head":  # over each head's d
        q, k = norm(f, q, P["q_norm"]), norm(f, k, P["k_norm"])
    q, k = q.transpose(1, 2), k.transpose(1, 2)
    v = v.view(B, S, kv, d).transpose(1, 2)
    if rope is not None:
        q, k = apply_rope(q, *rope), apply_rope(k, *rope)
    k, v = k.repeat_interleave(a // kv, dim=1), v.repeat_interleave(a // kv, dim=1)
    scale = f["attn_scale"] or 1.0 / math.sqrt(d)
    if f["attn_scale_inverse_layer"]:
        scale = scale / (l + 1)
    scores = softcap((q @ k.transpose(-2, -1)) * scale, f["attn_softcap"])
    i = torch.arange(S)[:, None]
    j = torch.arange(S)[None, :]
    allowed = j <= i
    if windowed(f, l):
        allowed = allowed & (i - j < f["sliding_window"])
    probs = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
    ctx = (probs @ v).transpose(1, 2).reshape(B, S, a * d)
    return linear(ctx, P["o"], P.get("o_b"))


def windowed(f, l):
    """Whether layer l attends through the window: every layer, the even ones (Gemma 2), all but
    each sliding_window_pattern-th (Gemma 3), or as layer_types lists."""
    if not f["sliding_window"]:
        return False
    if f.get("layer_types"):  # transformers 5's list of every layer's attention
        return f["layer_types"][l] == "sliding_attention"
    pattern = f.get("sliding_window_pattern", 0)
    if pattern:
        return (l + 1) % pattern != 0
    return f["sliding_window_layers"] == "all" or l % 2 == 0


def mlp(f, P, y):
    if "router" in P:
        return mixtures.forward(f, P, y)
    if f["mlp"] in ("gelu_tanh", "gelu"):
        act = linear(y, P["fc"], P.get("fc_b"))
        act = F.gelu(act, approximate="tanh" if f["mlp"] == "gelu_tanh" else "none")
    else:
        g, u = linear(y, P["gate"], P.get("gate_b")), linear(y, P["up"], P.get("up_b"))
        act = (F.silu(g) if f["mlp"] == "swiglu" else F.gelu(g, approximate="tanh")) * u
    return linear(act, P["down"], P.get("down_b"))


def embed_factor(f, dtype):
    """Gemma's sqrt(hidden), rounded to the run's dtype (float32 here) first."""
    return torch.tensor(math.sqrt(f["hidden"]), dtype=torch.float32).to(dtype)


def forward(w, f, idx, router_logits=None, route_counts=None):
    """Logits [B, S, vocab] of token ids idx [B, S]; gpt-oss's routers append their logits to the
    list router_logits when one is given; the softmax routers of mixtures.forward append each
    sparse layer's choices per expert to route_counts."""
    B, S = idx.shape
    dtype = next(iter(w.values())).dtype
    gpt2, neox, falcon = f["names"] == "gpt2", f["names"] == "gpt_neox", f["names"] == "falcon"
    wte = w["transformer.wte.weight" if gpt2 else "gpt_neox.embed_in.weight" if neox
            else "transformer.word_embeddings.weight" if falcon else "model.embed_tokens.weight"]
    x = wte[idx]
    if f["embed_scale"]:
        x = x * embed_factor(f, dtype)
    x = x * f["embedding_multiplier"]
    if f["position"] == "learned":
        x = x + w["transformer.wpe.weight"][:S]
    rope = rope_tables(f, S, dtype) if f["position"] == "rope" else None
    # Gemma 3: windowed layers rotate on their own base, without the global layers' scaling.
    local = f.get("rope_local_theta", 0.0)
    rope_local = rope_tables(dict(f, rope_theta=local, rope_scaling=None), S, dtype) if rope and local else rope

    def maybe_norm(slot_norm, t):
        return t if slot_norm is None else norm(f, t, *slot_norm)

    for l in range(f["layers"]):
        P = _layer(w, f, l)
        if router_logits is not None:
            P["router_logits"] = router_logits
        if route_counts is not None:
            P["route_counts"] = route_counts
        rope_l = rope_local if windowed(f, l) else rope
        if f.get("no_rope_layers") and not f["no_rope_layers"][l]:
            rope_l = None  # a layer without RoPE (SmolLM3's NoPE)
        r = f["residual_multiplier"]
        if f["block_layout"] != "sequential":  # both branches read the block's input
            y = maybe_norm(P["attn_in"], x)
            z = y if f["block_layout"] == "parallel_shared_norm" else maybe_norm(P["mlp_in"], x)
            x = x + attention(f, P, l, y, rope_l) * r + mlp(f, P, z) * r
            continue
        x = x + maybe_norm(P["attn_out"], attention(f, P, l, maybe_norm(P["attn_in"], x), rope_l)) * r
        x = x + maybe_norm(P["mlp_out"], mlp(f, P, maybe_norm(P["mlp_in"], x))) * r
    if gpt2 or falcon:
        x = norm(f, x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"])
    elif neox:
        x = norm(f, x, w["gpt_neox.final_layer_norm.weight"], w["gpt_neox.final_layer_norm.bias"])
    else:
        x = norm(f, x, w["model.norm.weight"], w.get("model.norm.bias"))
    head = wte if f["tied_embeddings"] else w["embed_out.weight" if neox else "lm_head.weight"]
    return softcap(x @ head.t() / f["logits_scaling"], f["final_softcap"])


def loss_of(w, f, window):
    """Mean cross-entropy of a [B, S + 1] window: the first S tokens in, the last S targets;
    plus the load-balancing loss (gpt_oss.load_balancing, over every sparse layer's router
    logits) times its coefficient under output_router_logits (Mixtral, Qwen-MoE, gpt-oss)."""
    coef = (f.get("moe") or {}).get("aux_coef", 0.0)
    router_logits = [] if coef else None
    logits = forward(w, f, window[:, :-1], router_logits)
    loss = F.cross_entropy(logits.reshape(-1, f["vocab"]), window[:, 1:].reshape(-1))
    if not coef:
        return loss
    if f["moe"].get("aux_detached"):  # the loss's value without its gradient (a control)
        router_logits = [r.detach() for r in router_logits]
    return loss + coef * gpt_oss.load_balancing(f["moe"], router_logits)


def decays(name, shape):
    """docs/batch.md: decay on every weight matrix (embeddings included; a stack of matrices, as
    gpt-oss stores its experts, too), no norm weight or bias (gpt-oss stacks its experts' biases
    as [experts, width]: biases by name)."""
    return len(shape) >= 2 and not name.endswith("bias")


def train(weights, f, windows, lr, beta1, beta2, eps, weight_decay, dtype, decay_rule=decays):
    """AdamW steps on each window [steps, B, S + 1] from `weights`; (losses, weights after)."""
    w = {n: t.detach().to(dtype).clone().requires_grad_(True) for n, t in weights.items()}
    groups = [{"params": [t for n, t in w.items() if decay_rule(n, t.shape)], "weight_decay": weight_decay},
              {"params": [t for n, t in w.items() if not decay_rule(n, t.shape)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=lr, betas=(beta1, beta2), eps=eps)
    losses = []
    for window in windows:
        opt.zero_grad()
        loss = loss_of(w, f, window)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {n: t.detach() for n, t in w.items()}


# ---------------------------------------------------------------------------------------------
# Files.

def write_family(name, out_dir, seed, n_tokens=4096):
    """config.json, weights.safetensors and tokens.npy of a family under out_dir/name; returns
    (dir, features, weights)."""
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    cfg = FAMILIES[name]
    with open(os.path.join(d, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2)
    f = features_from_hf(cfg)
    w = make_weights(f, seed)
    write_safetensors(os.path.join(d, "weights.safetensors"), w)
    rng = np.random.default_rng(seed)
    np.save(os.path.join(d, "tokens.npy"), rng.integers(0, f["vocab"], n_tokens).astype("<i4"))
    return d, f, w


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    for i, name in enumerate(FAMILIES):
        print(write_family(name, sys.argv[1], 100 + i)[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
