#!/usr/bin/python3
"""Checks of the family reference (families.py) against itself: features that must reduce to
one another do, OLMo 2 and Gemma 2 match forwards written out by hand from their Hugging Face
decoder layers, and the RoPE scaling formulas give hand-computed values. float64 throughout.

Usage: /usr/bin/python3 families_checks.py   (prints each check; exit 1 when one fails)
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from families import (BATCH, FAMILIES, SEQ, apply_rope, embed_factor, features_from_hf,  # noqa: E402
                      forward, is_norm_weight, loss_of, make_weights, rope_parameters, rope_tables,
                      rotate_half, tensor_shapes)
import by_hand  # noqa: E402
import deepseek_by_hand  # noqa: E402
import falcon_by_hand  # noqa: E402
import gemma3_by_hand  # noqa: E402
import gpt_neox_by_hand  # noqa: E402
import gpt_oss_by_hand  # noqa: E402
import granite_by_hand  # noqa: E402
import llama4  # noqa: E402
import llama4_by_hand  # noqa: E402
import moe_by_hand  # noqa: E402
import qwen3_by_hand  # noqa: E402


def _variant(name, **changes):
    f = features_from_hf(FAMILIES[name])
    f.update(changes)
    return f


def self_checks():
    """(description, ok, detail) for each check of the reference against itself."""
    out = []
    torch.manual_seed(0)
    dt = torch.float64
    win = torch.randint(0, 64, (BATCH, SEQ + 1))

    def loss(f, w):
        return loss_of({n: t.to(dt) for n, t in w.items()}, f, win).item()

    def close(a, b, tol=1e-12):
        return abs(a - b) <= tol * max(1.0, abs(a))

    def check(desc, ok, detail=""):
        out.append((desc, bool(ok), detail))

    llama = features_from_hf(FAMILIES["llama"])
    wl = make_weights(llama, 5)

    # Gemma without its offset, embed scale, geglu and tied head, with head_dim = hidden/heads,
    # is Llama: the same weights give the same loss.
    g = _variant("gemma", norm_unit_offset=False, embed_scale=False, mlp="swiglu", tied_embeddings=False,
                 head_dim=8, kv_heads=2, ffn=56, norm_eps=1e-5)
    check("gemma with unit offset off, no embed scale, swiglu, untied = llama", close(loss(g, wl), loss(llama, wl)))
    # The unit offset: weights w under (1 + w) are weights 1 + w without it.
    gem = features_from_hf(FAMILIES["gemma"])
    wg = make_weights(gem, 6)
    g_plain = dict(gem, norm_unit_offset=False)
    wg_plus = {n: (1 + t.to(dt) if is_norm_weight(n) else t) for n, t in wg.items()}
    check("gemma's (1 + w) norm = a plain norm of weight 1 + w", close(loss(gem, wg), loss(g_plain, wg_plus)))
    # embed_scale = the embedding table scaled (tied: the head is then scaled too, so untie).
    gu = dict(gem, tied_embeddings=False)
    wu = dict(wg, **{"lm_head.weight": wg["model.embed_tokens.weight"]})
    ws = dict(wu, **{"model.embed_tokens.weight": wg["model.embed_tokens.weight"].to(dt) * embed_factor(gem, dt)})
    check("embed_scale = the embedding rows times sqrt(hidden) (fp32-rounded)",
          close(loss(gu, wu), loss(dict(gu, embed_scale=False), ws)))
    check("a tied head = an lm_head equal to the embeddings", close(loss(gem, wg), loss(gu, wu)))

    # Mistral with a window >= seq is Llama (with mistral's theta); a smaller window is not.
    mis = features_from_hf(FAMILIES["mistral"])
    check("mistral with window >= seq = no window",
          close(loss(dict(mis, sliding_window=SEQ), wl), loss(dict(mis, sliding_window=0), wl)))
    check("mistral's window 6 changes the loss", not close(loss(mis, wl), loss(dict(mis, sliding_window=0), wl)))
    # The window admits W keys including the query: window 1 = each token attends only itself.
    check("window 1: a query sees only itself, so the last position ignores every earlier token",
          _window_one_is_local(dict(mis, sliding_window=1), wl))

    # OLMo 2 and Gemma 2 against forwards written out by hand from their decoder layers.
    ol = features_from_hf(FAMILIES["olmo2"])
    wo = make_weights(ol, 7)
    check("olmo2 forward = hand-written post-norm + qk-norm block", _olmo2_by_hand(ol, wo, win))
    g2 = features_from_hf(FAMILIES["gemma2"])
    wg2 = make_weights(g2, 8)
    check("gemma2 forward = hand-written sandwich block (softcaps, window on layer 0 only)",
          _gemma2_by_hand(g2, wg2, win))
    check("gemma2's softcaps change the loss",
          not close(loss(g2, wg2), loss(dict(g2, attn_softcap=0.0, final_softcap=0.0), wg2)))
    check("gemma2's window applies to even layers only: window on all layers differs",
          not close(loss(g2, wg2), loss(dict(g2, sliding_window_layers="all"), wg2)))

    qw3 = features_from_hf(FAMILIES["qwen3"])
    check("qwen3 forward = hand-written block with per-head q_norm / k_norm (qwen3_by_hand.py)",
          qwen3_by_hand.matches(qw3, make_weights(qw3, 13), win, loss_of))

    gr = features_from_hf(FAMILIES["granite"])
    check("granite forward = hand-written block with its four multipliers (granite_by_hand.py)",
          granite_by_hand.matches(gr, make_weights(gr, 14), win, loss_of))

    nx = features_from_hf(FAMILIES["gpt_neox"])
    check("gpt_neox forward = hand-written parallel block, per-head query_key_value, partial rotary "
          "(gpt_neox_by_hand.py)", gpt_neox_by_hand.matches(nx, make_weights(nx, 15), win, loss_of))

    for name, new_arch in (("falcon", False), ("falcon_rw", True)):
        fa = features_from_hf(FAMILIES[name])
        check("%s forward = hand-written Falcon layer, its query_key_value split as Hugging Face splits "
              "it (falcon_by_hand.py)" % name, falcon_by_hand.matches(fa, make_weights(fa, 16), win, loss_of, new_arch))

    g3 = features_from_hf(FAMILIES["gemma3"])
    check("gemma3 forward = hand-written Gemma 3 layer: per-head (1 + w) QK-norm, a RoPE base per "
          "layer kind, the window on all but every pattern-th layer (gemma3_by_hand.py)",
          gemma3_by_hand.matches(FAMILIES["gemma3"], g3, make_weights(g3, 17), win, loss_of))
    g3t = features_from_hf(FAMILIES["gemma3_types"])
    check("gemma3_types forward = hand-written Gemma 3 layer with layer_types giving each layer's attention "
          "(gemma3_by_hand.py)", gemma3_by_hand.matches(FAMILIES["gemma3_types"], g3t, make_weights(g3t, 18), win,
                                                         loss_of))

    for i, name in enumerate(("mixtral", "qwen3_moe", "qwen2_moe")):
        fm = features_from_hf(FAMILIES[name])
        check("%s forward = hand-written sparse block: softmax router, top-k, experts gathered and added "
              "back by index (moe_by_hand.py)" % name,
              moe_by_hand.matches(FAMILIES[name], fm, make_weights(fm, 19 + i), win, loss_of))

    # DeepSeek: the tiny configs and variants with the other paths (a full q_proj, attention biases,
    # rotate_half pairs, no renormalisation; V2's greedy top-k, a compressed query).
    variants = [("deepseek_v3", {}), ("deepseek_v2", {}),
                ("deepseek_v3", dict(q_lora_rank=None, attention_bias=True, rope_interleave=False, norm_topk_prob=False)),
                ("deepseek_v2", dict(topk_method="greedy", q_lora_rank=12, attention_bias=True))]
    for i, (name, changes) in enumerate(variants):
        c = dict(FAMILIES[name], **changes)
        fd = features_from_hf(c)
        what = "%s%s" % (name, " (%s)" % ", ".join("%s=%s" % kv for kv in changes.items()) if changes else "")
        check("%s tensors = the shapes Hugging Face's modules build from the config (deepseek_by_hand.py)" % what,
              deepseek_by_hand.module_shapes(c) == tensor_shapes(fd))
        check("%s forward = hand-written Hugging Face MLA, YaRN and router (deepseek_by_hand.py)" % what,
              deepseek_by_hand.matches(c, fd, make_weights(fd, 22 + i), win, loss_of))

    # gpt-oss: the tiny config, with the load-balancing loss, and with the other paths (no attention
    # biases, one kv head per head, the window on layer 1, YaRN truncated); loss and every gradient.
    go = FAMILIES["gpt_oss"]
    variants = [{}, dict(output_router_logits=True),
                dict(attention_bias=False, num_key_value_heads=4, layer_types=["full_attention", "sliding_attention"],
                     rope_scaling=dict(go["rope_scaling"], truncate=True))]
    for i, changes in enumerate(variants):
        c = dict(go, **changes)
        fo = features_from_hf(c)
        what = "gpt_oss%s" % (" (%s)" % ", ".join("%s=%s" % kv for kv in changes.items()) if changes else "")
        check("%s tensors = the shapes Hugging Face's modules build from the config (gpt_oss_by_hand.py)" % what,
              gpt_oss_by_hand.module_shapes(c) == tensor_shapes(fo))
        gap, grads, sinks = gpt_oss_by_hand.matches(c, fo, make_weights(fo, 26 + i), win, loss_of)
        check("%s loss and gradients = hand-written Hugging Face attention with sinks, YaRN, router and experts%s "
              "(gpt_oss_by_hand.py); every sink gets a gradient" % (what, ", load-balancing loss" if i == 1 else ""),
              gap < 1e-12 and grads < 1e-12 and sinks > 0, "loss %.0e, gradients %.0e, smallest |sink grad| %.0e"
              % (gap, grads, sinks))
    v5 = {k: v for k, v in go.items() if k not in ("rope_scaling", "rope_theta")}
    v5["rope_parameters"] = dict(go["rope_scaling"], rope_theta=go["rope_theta"])
    check("gpt_oss in the transformers 5 layout (rope_parameters) reads as its 4.x config",
          features_from_hf(v5) == features_from_hf(go))

    out.extend(llama4_checks(win))

    # Phi-3's fused tensors = Llama's separate ones.
    ph = features_from_hf(FAMILIES["phi3"])
    wp = make_weights(ph, 9)
    split = _unfuse_phi3(ph, wp)
    check("phi3 fused qkv_proj/gate_up_proj = split q/k/v and gate/up under llama names",
          close(loss(ph, wp), loss(dict(ph, names="llama"), split)))
    check("phi3 partial rotary: dims past rotary_dim are not rotated", _partial_rotary_keeps_tail(ph))

    # Qwen2: biases at zero = no biases.
    qw = features_from_hf(FAMILIES["qwen2"])
    wq = make_weights(qw, 10)
    wq0 = {n: (torch.zeros_like(t) if n.endswith("_proj.bias") else t) for n, t in wq.items()}
    check("qwen2 with zero q/k/v biases = no biases",
          close(loss(qw, wq0), loss(dict(qw, qkv_bias=False), {n: t for n, t in wq.items() if not n.endswith("bias")})))

    # GPT-2's attention flags.
    gp = features_from_hf(FAMILIES["gpt2"])
    wgp = make_weights(gp, 11)
    check("gpt2 attn_scale 1/sqrt(d) explicit = default",
          close(loss(dict(gp, attn_scale=1 / math.sqrt(8)), wgp), loss(gp, wgp)))
    check("gpt2 inverse-layer scale changes the loss",
          not close(loss(dict(gp, attn_scale_inverse_layer=True), wgp), loss(gp, wgp)))

    out.extend(rope_checks())
    out.extend(feature_effects())
    return out


# Per family, each feature it has against the plain Llama step, turned off, with the weights it
# then lacks: each must move the loss ten times past the end-to-end tolerance (1e-6), so that
# an engine that ignored the feature would fail there.
_EFFECTS = [
    ("gpt2_flags", dict(attn_scale=0.0), None),
    ("gpt2_flags", dict(attn_scale_inverse_layer=False), None),
    ("gpt2_flags", dict(mlp="gelu_tanh"), None),
    ("llama_bias", dict(qkv_bias=False), "self_attn.q_proj.bias self_attn.k_proj.bias self_attn.v_proj.bias"),
    ("llama_bias", dict(out_bias=False), "o_proj.bias"),
    ("llama_bias", dict(mlp_bias=False), "gate_proj.bias up_proj.bias down_proj.bias"),
    ("llama3", dict(rope_scaling=None), None),
    ("mistral", dict(sliding_window=0), None),
    ("qwen2", dict(rope_scaling=None), None),
    ("qwen2", dict(qkv_bias=False), "_proj.bias"),
    ("gemma", dict(norm_unit_offset=False), None),
    ("gemma", dict(embed_scale=False), None),
    ("gemma", dict(mlp="swiglu"), None),
    ("gemma2", dict(attn_softcap=0.0), None),
    ("gemma2", dict(final_softcap=0.0), None),
    ("gemma2", dict(attn_scale=0.0), None),
    ("gemma2", dict(sliding_window=0), None),
    ("phi3", dict(rope_scaling=None), None),
    ("phi3", dict(partial_rotary_factor=1.0, rope_scaling=None), None),  # (the factors fit rotary_dim)
    ("olmo2", dict(qk_norm="none"), "q_norm.weight k_norm.weight"),
    ("qwen3", dict(qk_norm="none"), "q_norm.weight k_norm.weight"),
    ("granite", dict(attn_scale=0.0), None),
    ("granite", dict(embedding_multiplier=1.0), None),
    ("granite", dict(residual_multiplier=1.0), None),
    ("granite", dict(logits_scaling=1.0), None),
    ("gpt_neox", dict(block_layout="sequential"), None),
    ("gpt_neox", dict(partial_rotary_factor=1.0), None),
    ("gemma3", dict(qk_norm="none"), "q_norm.weight k_norm.weight"),
    ("gemma3", dict(rope_local_theta=0.0), None),
    ("gemma3", dict(sliding_window_pattern=0), None),
    ("gemma3", dict(rope_scaling=None), None),
    ("smollm3", dict(no_rope_layers=[1, 1]), None),
    # DeepSeek: V3's softmax mscale^2 (and V2 given it, which Hugging Face's V2 does not apply), no
    # YaRN, YaRN without its cos/sin factor, no RoPE on q_pe / k_pe, rotate_half pairs.
    ("deepseek_v3", dict(attn_scale=12 ** -0.5), None),
    ("deepseek_v2", dict(attn_scale=12 ** -0.5 * (0.07 * math.log(40) + 1) ** 2), None),
    ("deepseek_v3", dict(rope_scaling=None), None),
    ("deepseek_v2", dict(rope_scaling=None), None),
    ("deepseek_v3", dict(rope_scaling=dict(FAMILIES["deepseek_v3"]["rope_scaling"], attention_factor=1.0)), None),
    ("deepseek_v2", dict(rope_scaling=dict(FAMILIES["deepseek_v2"]["rope_scaling"], attention_factor=1.0)), None),
    ("deepseek_v3", dict(position="none"), None),
    ("deepseek_v2", dict(position="none"), None),
    ("deepseek_v3", dict(rope_interleave=False), None),
    # gpt-oss: no sinks, no window, the window on the other layer, no YaRN, YaRN truncated to whole
    # dims or without its cos/sin factor, no q/k/v or o biases.
    ("gpt_oss", dict(sinks=False), "self_attn.sinks"),
    ("gpt_oss", dict(sliding_window=0), None),
    ("gpt_oss", dict(layer_types=["full_attention", "sliding_attention"]), None),
    ("gpt_oss", dict(rope_scaling=None), None),
    ("gpt_oss", dict(rope_scaling=dict(FAMILIES["gpt_oss"]["rope_scaling"], truncate=True)), None),
    ("gpt_oss", dict(rope_scaling=dict(FAMILIES["gpt_oss"]["rope_scaling"], attention_factor=1.0)), None),
    ("gpt_oss", dict(qkv_bias=False), "self_attn.q_proj.bias self_attn.k_proj.bias self_attn.v_proj.bias"),
    ("gpt_oss", dict(out_bias=False), "o_proj.bias"),
    # Llama 4: no chunks, chunks on every layer, no L2 QK-norm, no temperature, rotate-half pairs
    # instead of adjacent ones, no RoPE scaling, RoPE (and its QK-norm) on layer 3 too.
    ("llama4_text", dict(attention_chunk=0), None),
    ("llama4_text", dict(layer_types=["chunked_attention"] * 4), None),
    ("llama4_text", dict(qk_norm="none"), None),
    ("llama4_text", dict(attn_temperature_tuning=False), None),
    ("llama4_text", dict(rope_pairs="half"), None),
    ("llama4_text", dict(rope_scaling=None), None),
    ("llama4_text", dict(no_rope_layers=[1, 1, 1, 1]), None),
]
# The mixtures of experts' own features (their routing has no Llama counterpart to turn off to).
_MOE_EFFECTS = [
    ("mixtral", lambda e: dict(e, norm=False)),
    ("mixtral", lambda e: dict(e, top_k=1)),
    ("qwen3_moe", lambda e: dict(e, norm=True)),
    ("qwen3_moe", lambda e: dict(e, sparse=[True, True])),
    ("qwen2_moe", lambda e: dict(e, shared=0)),
    # DeepSeek's routers: the correction bias in choosing, the groups, their score (V3 the sum of
    # the two best, V2 the best), renormalisation, routed_scaling_factor, the shared expert.
    ("deepseek_v3", lambda e: dict(e, score_bias=False)),
    ("deepseek_v3", lambda e: dict(e, topk_group=e["groups"])),
    ("deepseek_v3", lambda e: dict(e, group_score="max")),
    ("deepseek_v3", lambda e: dict(e, norm=False)),
    ("deepseek_v3", lambda e: dict(e, scaling=1.0)),
    ("deepseek_v3", lambda e: dict(e, shared=0)),
    ("deepseek_v2", lambda e: dict(e, topk_group=e["groups"])),
    ("deepseek_v2", lambda e: dict(e, group_score="top2_sum")),
    ("deepseek_v2", lambda e: dict(e, norm=True)),
    ("deepseek_v2", lambda e: dict(e, scaling=1.0)),
    ("deepseek_v2", lambda e: dict(e, shared=0)),
    # gpt-oss's router and experts: no clamp, gate and up as contiguous halves, no router bias,
    # softmax over all experts before the top-k (not renormalised), top-1, the sigmoid's gain 1, and
    # the load-balancing loss (output_router_logits) on.
    ("gpt_oss", lambda e: dict(e, limit=None)),
    ("gpt_oss", lambda e: dict(e, interleaved=False)),
    ("gpt_oss", lambda e: dict(e, router_bias=False)),
    ("gpt_oss", lambda e: dict(e, norm=False)),
    ("gpt_oss", lambda e: dict(e, top_k=1)),
    ("gpt_oss", lambda e: dict(e, alpha=1.0)),
    ("gpt_oss", lambda e: dict(e, aux_coef=0.9)),
    # Llama 4: the score on the expert's output instead of its input, no shared expert, every layer
    # a mixture, the mixtures on the even layers, the chosen scores renormalised, gate|up
    # interleaved, top-0 (the shared expert alone) and top-2; top-2's own: top-1, score on output.
    ("llama4_text", lambda e: dict(e, weight_on="output")),
    ("llama4_text", lambda e: dict(e, shared=0)),
    ("llama4_text", lambda e: dict(e, sparse=[True] * 4)),
    ("llama4_text", lambda e: dict(e, sparse=[True, False, True, False])),
    ("llama4_text", lambda e: dict(e, norm=True)),
    ("llama4_text", lambda e: dict(e, interleaved=True)),
    ("llama4_text", lambda e: dict(e, top_k=0)),
    ("llama4_text", lambda e: dict(e, top_k=2)),
    ("llama4_text_top2", lambda e: dict(e, top_k=1)),
    ("llama4_text_top2", lambda e: dict(e, weight_on="output")),
    ("llama4_text_top2", lambda e: dict(e, norm=True)),
]


def feature_effects():
    out = []
    win = torch.randint(0, 64, (BATCH, SEQ + 1), generator=torch.Generator().manual_seed(3))
    for name, change, drop in _EFFECTS:
        f = features_from_hf(FAMILIES[name])
        w = {n: t.to(torch.float64) for n, t in make_weights(f, 12).items()}
        kept = {n: t for n, t in w.items() if not (drop and any(n.endswith(d) for d in drop.split()))}
        d = abs(loss_of(w, f, win).item() - loss_of(kept, dict(f, **change), win).item())
        out.append(("%s: %s moves the loss by %.1e > 1e-5" % (name, ", ".join("%s=%s" % kv for kv in change.items()), d),
                    d > 1e-5, ""))
    for name, change in _MOE_EFFECTS:
        f = features_from_hf(FAMILIES[name])
        f2 = dict(f, moe=change(f["moe"]))
        w = {n: t.to(torch.float64) for n, t in dict(make_weights(f2, 12), **make_weights(f, 12)).items()}
        d = abs(loss_of(w, f, win).item() - loss_of(w, f2, win).item())
        diff = ", ".join("%s=%s" % (k, v) for k, v in f2["moe"].items() if f["moe"][k] != v)
        out.append(("%s: %s moves the loss by %.1e > 1e-5" % (name, diff, d), d > 1e-5, ""))
    return out


def llama4_checks(win):
    """Llama 4: the tiny configs and variants taking the other paths, against llama4_by_hand.py
    (tensor shapes, loss, every gradient); the chunk rule, the temperature's floor and the
    transformers 5 layout on their own."""
    out = []

    def check(desc, ok, detail=""):
        out.append((desc, bool(ok), detail))

    def loss(f, w):
        return loss_of({n: t.to(torch.float64) for n, t in w.items()}, f, win).item()

    # The defaults derived (NoPE every 2nd layer, every layer a mixture); the lists given (layer 3
    # NoPE but chunked, layer 0 RoPE but full, mixtures on 0 and 3) with no QK-norm, attention
    # biases and a tied head; no RoPE scaling, no temperature, head_dim and kv heads from null.
    variants = [("llama4_text", {}), ("llama4_text_top2", {}),
                ("llama4_text", dict(no_rope_layers=None, no_rope_layer_interval=2, interleave_moe_layer_step=1)),
                ("llama4_text_top2", dict(moe_layers=[0, 3], use_qk_norm=False, attention_bias=True,
                                          tie_word_embeddings=True, layer_types=["full_attention"] +
                                          ["chunked_attention"] * 3)),
                ("llama4_text", dict(rope_scaling=None, attn_temperature_tuning=False, head_dim=None,
                                     num_key_value_heads=None))]
    for i, (name, changes) in enumerate(variants):
        c = dict(FAMILIES[name], **changes)
        f = features_from_hf(c)
        what = "%s%s" % (name, " (%s)" % ", ".join("%s=%s" % kv for kv in changes.items()) if changes else "")
        check("%s tensors = the shapes Hugging Face's modules build from the config (llama4_by_hand.py)" % what,
              llama4_by_hand.module_shapes(c) == tensor_shapes(f))
        gap, grads, routed = llama4_by_hand.matches(c, f, make_weights(f, 40 + i), win, loss_of)
        check("%s loss and gradients = hand-written Hugging Face Llama 4 (complex RoPE, L2 QK-norm, temperature, "
              "chunk masks, sigmoid router on the experts' inputs, batched experts, shared expert; "
              "llama4_by_hand.py); every router and expert tensor gets a gradient" % what,
              gap < 1e-12 and grads < 1e-12 and routed > 0,
              "loss %.0e, gradients %.0e, smallest max |router or expert grad| %.0e" % (gap, grads, routed))
    f = features_from_hf(FAMILIES["llama4_text"])
    w = make_weights(f, 47)
    check("llama4: attention_chunk_size >= seq = no chunking",
          abs(loss(dict(f, attention_chunk=SEQ), w) - loss(dict(f, attention_chunk=0), w)) < 1e-12)
    check("llama4: chunks of 6 (one chunked layer): positions 12-15 ignore tokens 0-11, position 11 does not",
          _chunks_are_local(f, w))
    check("llama4: floor_scale > seq makes the temperature 1 = no tuning",
          abs(loss(dict(f, floor_scale=float(SEQ + 1)), w) - loss(dict(f, attn_temperature_tuning=False), w)) < 1e-12)
    t = llama4.temperature(f, SEQ, torch.float64)
    want = [1 + 0.5 * math.log(1 + (p + 1) // 4) for p in range(SEQ)]
    check("llama4: temperature 1 + attn_scale ln(1 + floor((p + 1) / floor_scale)) at floor_scale 4, attn_scale 0.5",
          torch.allclose(t, torch.tensor(want, dtype=torch.float64), rtol=0, atol=1e-15),
          " ".join("%.3f" % x for x in t[[0, 3, 7, 11, 15]].tolist()))
    c5 = {k: v for k, v in FAMILIES["llama4_text"].items() if k not in ("rope_scaling", "rope_theta")}
    c5["rope_parameters"] = dict(FAMILIES["llama4_text"]["rope_scaling"], rope_theta=500000.0)
    check("llama4_text in the transformers 5 layout (rope_parameters) reads as its 4.x config",
          features_from_hf(c5) == f)
    return out


def _chunks_are_local(f, w):
    """One layer (layer 0: RoPE, chunked, dense): changing tokens 0-11 leaves the logits at
    positions 12-15 (the last chunk) as they were and moves position 11's."""
    w64 = {n: t.to(torch.float64) for n, t in w.items()}
    a = torch.randint(0, 64, (1, SEQ), generator=torch.Generator().manual_seed(4))
    b = a.clone()
    b[0, :12] = (b[0, :12] + 1) % 64
    f1 = dict(f, layers=1)
    la, lb = forward(w64, f1, a), forward(w64, f1, b)
    return torch.allclose(la[0, 12:], lb[0, 12:], rtol=0, atol=1e-12) and not torch.allclose(la[0, 11], lb[0, 11])


def _window_one_is_local(f, w):
    dt = torch.float64
    w64 = {n: t.to(dt) for n, t in w.items()}
    a = torch.randint(0, 64, (1, SEQ))
    b = a.clone()
    b[0, :-1] = (b[0, :-1] + 1) % 64  # every token but the last changes
    la, lb = forward(w64, dict(f, layers=1), a), forward(w64, dict(f, layers=1), b)
    return torch.allclose(la[0, -1], lb[0, -1], rtol=0, atol=1e-12) and not torch.allclose(la[0, 0], lb[0, 0])


def _rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _hf_rope(q, k, cos, sin):
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def _olmo2_by_hand(f, w, win):
    """OLMo 2 (Olmo2DecoderLayer): h = x + post_attention_layernorm(attn(x)) with q_norm / k_norm
    over the whole projections before RoPE; h + post_feedforward_layernorm(mlp(h))."""
    w = by_hand.as64(w)
    idx = win[:, :-1]
    B, S = idx.shape
    a, kv, d, eps = f["heads"], f["kv_heads"], f["head_dim"], f["norm_eps"]
    cos, sin = by_hand.cos_sin(f["rope_theta"], d, S)
    x = w["model.embed_tokens.weight"][idx]
    for l in range(f["layers"]):
        p = "model.layers.%d." % l
        q = _rms(x @ w[p + "self_attn.q_proj.weight"].t(), w[p + "self_attn.q_norm.weight"], eps)
        k = _rms(x @ w[p + "self_attn.k_proj.weight"].t(), w[p + "self_attn.k_norm.weight"], eps)
        v = x @ w[p + "self_attn.v_proj.weight"].t()
        q = q.view(B, S, a, d).transpose(1, 2)
        k = k.view(B, S, kv, d).transpose(1, 2)
        v = v.view(B, S, kv, d).transpose(1, 2)
        q, k = _hf_rope(q, k, cos, sin)
        rep = a // kv
        k = k[:, :, None].expand(B, kv, rep, S, d).reshape(B, a, S, d)  # HF repeat_kv
        v = v[:, :, None].expand(B, kv, rep, S, d).reshape(B, a, S, d)
        s = q @ k.transpose(-1, -2) / math.sqrt(d) + by_hand.causal(S)
        o = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, S, a * d) @ w[p + "self_attn.o_proj.weight"].t()
        x = x + _rms(o, w[p + "post_attention_layernorm.weight"], eps)
        m = F.silu(x @ w[p + "mlp.gate_proj.weight"].t()) * (x @ w[p + "mlp.up_proj.weight"].t())
        x = x + _rms(m @ w[p + "mlp.down_proj.weight"].t(), w[p + "post_feedforward_layernorm.weight"], eps)
    logits = _rms(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].t()
    ref = F.cross_entropy(logits.reshape(-1, f["vocab"]), win[:, 1:].reshape(-1)).item()
    return abs(ref - loss_of(w, f, win).item()) < 1e-12


def _gemma2_by_hand(f, w, win):
    """Gemma 2 (Gemma2DecoderLayer): sandwich norms with (1 + w), scores * query_pre_attn_scalar^-0.5
    capped by tanh, sliding window on even layers, geglu, embeddings * sqrt(hidden), final cap."""
    dt = torch.float64
    w = {n: t.to(dt) for n, t in w.items()}
    idx = win[:, :-1]
    B, S = idx.shape
    a, kv, d, eps, W = f["heads"], f["kv_heads"], f["head_dim"], f["norm_eps"], f["sliding_window"]
    cfg = FAMILIES["gemma2"]

    def n1(x, name):
        return _rms(x, 1 + w[name], eps)

    inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, d, 2, dtype=dt) / d))
    ang = torch.arange(S, dtype=dt)[:, None] * inv
    cos, sin = torch.cat((ang, ang), -1).cos(), torch.cat((ang, ang), -1).sin()
    x = w["model.embed_tokens.weight"][idx] * torch.tensor(cfg["hidden_size"] ** 0.5, dtype=torch.float32).to(dt)
    for l in range(f["layers"]):
        p = "model.layers.%d." % l
        r = x
        y = n1(x, p + "input_layernorm.weight")
        q = (y @ w[p + "self_attn.q_proj.weight"].t()).view(B, S, a, d).transpose(1, 2)
        k = (y @ w[p + "self_attn.k_proj.weight"].t()).view(B, S, kv, d).transpose(1, 2)
        v = (y @ w[p + "self_attn.v_proj.weight"].t()).view(B, S, kv, d).transpose(1, 2)
        q, k = _hf_rope(q, k, cos, sin)
        k, v = k.repeat_interleave(a // kv, 1), v.repeat_interleave(a // kv, 1)
        s = (q @ k.transpose(-1, -2)) * cfg["query_pre_attn_scalar"] ** -0.5
        cap = cfg["attn_logit_softcapping"]
        s = torch.tanh(s / cap) * cap
        mask = torch.ones(S, S, dtype=torch.bool).tril()
        if l % 2 == 0:
            mask = mask & ~torch.ones(S, S, dtype=torch.bool).tril(-W)
        s = s.masked_fill(~mask, float("-inf"))
        o = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, S, a * d) @ w[p + "self_attn.o_proj.weight"].t()
        x = r + n1(o, p + "post_attention_layernorm.weight")
        y = n1(x, p + "pre_feedforward_layernorm.weight")
        m = F.gelu(y @ w[p + "mlp.gate_proj.weight"].t(), approximate="tanh") * (y @ w[p + "mlp.up_proj.weight"].t())
        x = x + n1(m @ w[p + "mlp.down_proj.weight"].t(), p + "post_feedforward_layernorm.weight")
    logits = n1(x, "model.norm.weight") @ w["model.embed_tokens.weight"].t()
    cap = cfg["final_logit_softcapping"]
    logits = torch.tanh(logits / cap) * cap
    ref = F.cross_entropy(logits.reshape(-1, f["vocab"]), win[:, 1:].reshape(-1)).item()
    return abs(ref - loss_of(w, f, win).item()) < 1e-12


def _unfuse_phi3(f, w):
    q, kv, ff = f["heads"] * f["head_dim"], f["kv_heads"] * f["head_dim"], f["ffn"]
    out = {}
    for n, t in w.items():
        if n.endswith("qkv_proj.weight"):
            b = n[: -len("qkv_proj.weight")]
            out[b + "q_proj.weight"], out[b + "k_proj.weight"], out[b + "v_proj.weight"] = t[:q], t[q:q + kv], t[q + kv:]
        elif n.endswith("gate_up_proj.weight"):
            b = n[: -len("gate_up_proj.weight")]
            out[b + "gate_proj.weight"], out[b + "up_proj.weight"] = t[:ff], t[ff:]
        else:
            out[n] = t
    return out


def _partial_rotary_keeps_tail(f):
    cos, sin, rd = rope_tables(f, SEQ, torch.float64)
    x = torch.randn(1, 1, SEQ, f["head_dim"], dtype=torch.float64)
    y = apply_rope(x, cos, sin, rd)
    return rd == f["head_dim"] // 2 and torch.equal(y[..., rd:], x[..., rd:]) and not torch.allclose(y[..., :rd], x[..., :rd])


def rope_checks():
    """The scaling formulas on hand-computed values."""
    out = []

    def check(desc, ok, detail=""):
        out.append((desc, bool(ok), detail))

    def near(a, b, tol=1e-12):
        return torch.allclose(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64),
                              rtol=tol, atol=0)

    base = 1.0 / (10000.0 ** (torch.tensor([0.0, 2, 4, 6], dtype=torch.float64) / 8))
    inv, af = rope_parameters(None, 10000.0, 8, 64, 16)
    check("rope default: theta^(-2i/d)", near(inv, base) and af == 1.0)
    inv, af = rope_parameters({"rope_type": "linear", "factor": 4.0}, 10000.0, 8, 64, 16)
    check("rope linear: frequencies / factor", near(inv, base / 4) and af == 1.0)
    inv, _ = rope_parameters({"type": "dynamic", "factor": 2.0}, 10000.0, 8, 64, 16)
    check("rope dynamic at seq <= max positions = default", near(inv, base))
    inv, _ = rope_parameters({"type": "dynamic", "factor": 2.0}, 10000.0, 8, 64, 128)
    b2 = 10000.0 * (2.0 * 128 / 64 - 1) ** (8 / 6)
    check("rope dynamic past max positions: base * (f s / m - (f - 1))^(d / (d - 2))",
          near(inv, 1.0 / b2 ** (torch.tensor([0.0, 2, 4, 6], dtype=torch.float64) / 8)))
    # llama3 with the llama3 family's numbers: wavelengths 6.3 (kept), 167 (smoothed), 4443 and
    # 118,000 (divided by 32); bands at 256 / 4 = 64 and 256 / 1.
    c = FAMILIES["llama3"]["rope_scaling"]
    inv, af = rope_parameters(c, 500000.0, 8, 8192, 16)
    b5 = 1.0 / (500000.0 ** (torch.tensor([0.0, 2, 4, 6], dtype=torch.float64) / 8))
    smooth = (256 / (2 * math.pi / b5[1].item()) - 1) / 3
    want = [b5[0].item(), ((1 - smooth) / 32 + smooth) * b5[1].item(), b5[2].item() / 32, b5[3].item() / 32]
    check("rope llama3: one frequency kept, one smoothed, two divided", near(inv, want) and af == 1.0,
          "smooth %.4f" % smooth)
    # llama3 with Llama 4 Scout's factors (8; low 1, high 4) and llama4_text's original length 64:
    # wavelength 6.3 kept, 32.5 smoothed, 167 and up divided by 8.
    c = FAMILIES["llama4_text"]["rope_scaling"]
    inv, af = rope_parameters(c, 500000.0, 16, 1024, 16)
    b16 = 1.0 / (500000.0 ** (torch.arange(0, 16, 2, dtype=torch.float64) / 16))
    s1 = (64 / (2 * math.pi / b16[1].item()) - 1) / 3
    want16 = torch.cat((b16[:1], torch.tensor([((1 - s1) / 8 + s1) * b16[1].item()], dtype=torch.float64), b16[2:] / 8))
    check("rope llama3 with Scout's factors: frequency 0 kept, 1 smoothed, 2-7 divided by 8",
          near(inv, want16) and af == 1.0, "smooth %.4f" % s1)
    # yarn with qwen2's numbers: correction dims floor(-0.87..)=0.. and ceil(1.88)=2 -> ramp 0, .5, 1, 1.
    c = FAMILIES["qwen2"]["rope_scaling"]
    inv, af = rope_parameters(c, 1e6, 8, 16384, 16)
    b6 = 1.0 / (1e6 ** (torch.tensor([0.0, 2, 4, 6], dtype=torch.float64) / 8))
    ramp = torch.tensor([0.0, 0.5, 1.0, 1.0], dtype=torch.float64)
    check("rope yarn: ramp 0, 1/2, 1, 1 between extrapolated and interpolated",
          near(inv, b6 * (1 - ramp) + b6 / 4 * ramp) and near(af, 0.1 * math.log(4) + 1))
    # yarn with DeepSeek's numbers over its 4 rope dims: correction dims floor(0.65) = 0 and
    # ceil(1.41) = 2 -> ramp 0, 1/2; the factor mscale(40, 0.9) / mscale(40, 0.7).
    c = FAMILIES["deepseek_v3"]["rope_scaling"]
    inv, af = rope_parameters(c, 10000.0, 4, 163840, 16)
    b7 = 1.0 / (10000.0 ** (torch.tensor([0.0, 2], dtype=torch.float64) / 4))
    check("rope yarn (deepseek): frequency 0 kept, frequency 1 half-way to / 40; factor (1 + 0.09 ln 40) / "
          "(1 + 0.07 ln 40)", near(inv, b7 * torch.tensor([1.0, 0.5 + 0.5 / 40], dtype=torch.float64))
          and near(af, (0.09 * math.log(40) + 1) / (0.07 * math.log(40) + 1)))
    inv, af = rope_parameters({"rope_type": "yarn", "factor": 4.0, "attention_factor": 1.5}, 1e6, 8, 4096, 16)
    check("rope yarn: an explicit attention_factor is used", af == 1.5)
    # longrope with phi3's numbers: seq 16 <= 32 takes short_factor; factor 128 / 32 = 4.
    c = FAMILIES["phi3"]["rope_scaling"]
    inv, af = rope_parameters(c, 10000.0, 4, 128, 16, 32)
    b4 = 1.0 / (10000.0 ** (torch.tensor([0.0, 2], dtype=torch.float64) / 4))
    check("rope longrope: short factors at seq <= original, sqrt(1 + ln 4 / ln 32)",
          near(inv, b4 / torch.tensor([1.0, 1.5], dtype=torch.float64))
          and near(af, math.sqrt(1 + math.log(4) / math.log(32))))
    inv, _ = rope_parameters(c, 10000.0, 4, 128, 64, 32)
    check("rope longrope: long factors past the original length",
          near(inv, b4 / torch.tensor([2.0, 6.0], dtype=torch.float64)))
    return out


def main():
    ok = True
    for desc, good, detail in self_checks():
        print("%s: %s%s" % ("ok" if good else "FAIL", desc, (" (%s)" % detail) if detail else ""))
        ok = ok and good
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
