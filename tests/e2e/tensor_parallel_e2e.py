#!/usr/bin/env python3
"""End-to-end test of tensor-parallel runs (`run --tp T [--sp] [--dp D]`), on the CPU with `tiny`
in fp32 and its dropout, `llama-tiny` (grouped-query attention, RoPE, SwiGLU) and a small OLMo 2
model file (QK-norm over the whole q and k projections, post-norm blocks).

Numerics: T = 2, T = 2 with --sp, and T = 2 x D = 2 (4 ranks) give the single-process losses
within an fp32 reduction-order bound. The ranks draw the single process's dropout masks (keyed by
global element position) and hold bitwise slices of its initialization, so what differs is only
the order of sums: a row-parallel linear's output (and a column-parallel linear's input
gradient) is the sum of T partial dot products of K/T terms instead of one of K terms. Each of
these sums is within gamma_K = K * 2^-24 of the exact one relative to the sum of its terms'
magnitudes (Higham, Th. 3.5), so the two orders differ by at most 2 * gamma_K. A block has four
linears whose sums are split; with n_lin = 4 * layers of them and K_max the widest split sum
(the ffn width), we take to first order, with the layer norms and the softmax not amplifying a
relative error (they normalise), |L_T - L_1| <= 2 * n_lin * gamma_Kmax * L_1 for the warmup
step and (k + 1) times that for the counted step k (each update carries the gradients' error
once more into the weights). For tiny that is 2 * 16 * 512 * 2^-24 = 9.8e-4 relative per step:
loose against the 1e-6 seen, tight against a wrong slice or a missing all-reduce (1e-1 and
more). Two runs of the same layout are bitwise identical. QK-norm's row statistic is a sum over
the whole q (k) width split in T partial sums (all-reduced), one more split sum of the same kind
per block inside a norm, which the bound's first order leaves unamplified; a rank normalizing by
its own heads' statistic instead is off by 1e-2 and more.

Memory: each rank's measured peak equals its predicted peak and `plan` with the same layout
(its stage's peak and static bytes), under `none`, `selective` and `uniform:segments=4` (full per-block recomputation).
Megatron-LM's options at T = 2 with sp: `selective:modules=core_attn+mlp+layernorm` (every module
rebuilt inside its block's backward, the linears' gathers and the sequence-parallel norms with
them) and `uniform:layers=1` give the losses of `none` at the same layout bit for bit.

Distributed checkpoints (--distribute-saved-activations, full per-block recomputation at T = 2,
alone and x D = 2): the undistributed losses bit for bit and a lower peak on every rank, the predicted and
`plan`'s.

Refusals before any process starts: heads not divisible by T (the numbers named);
distributed checkpoints without T > 1, with sp, under a policy that keeps more than block
inputs, or one that offloads; --device cuda:N for ranks, and --device cuda on a machine without
NCCL or with fewer GPUs than ranks (CUDA ranks themselves: tests/gpu/nccl_ranks_e2e.py).
Python standard library only.
"""
import argparse
import json
import os
import sys
import tempfile

import e2e_common
from e2e_common import check

U32 = 2.0 ** -24

# OLMo 2 in small: QK-norm (weights over all heads' q and k), post-norm, grouped-query attention.
OLMO2_SMALL = {"name": "olmo2-small", "architecture": "olmo2", "layers": 2, "hidden": 64, "heads": 4,
               "kv_heads": 2, "ffn": 128, "seq": 32, "batch": 4, "vocab": 256, "dropout": 0.0,
               "attention": "naive", "dtype": "fp32"}

# Qwen3 in small: QK-norm per head (one head_dim weight each for q and k, whole on every rank, its
# gradient summed over the ranks), head_dim past hidden / heads.
QWEN3_SMALL = {"name": "qwen3-small", "architecture": "qwen3", "layers": 2, "hidden": 64, "heads": 4,
               "kv_heads": 2, "head_dim": 32, "ffn": 128, "seq": 32, "batch": 4, "vocab": 256,
               "dropout": 0.0, "attention": "naive", "dtype": "fp32"}

# GPT-NeoX in small: the parallel block (both branches read the block's input), a quarter of each
# head rotated, biases everywhere.
NEOX_SMALL = {"name": "neox-small", "architecture": "gpt_neox", "layers": 2, "hidden": 64, "heads": 4,
              "kv_heads": 4, "ffn": 256, "seq": 32, "batch": 4, "vocab": 256, "dropout": 0.0,
              "attention": "naive", "dtype": "fp32", "partial_rotary_factor": 0.25}

# Falcon's new decoder architecture in small: kv groups, a norm per branch, no linear biases.
FALCON_SMALL = {"name": "falcon-small", "architecture": "falcon", "block_layout": "parallel", "layers": 2,
                "hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 256, "seq": 32, "batch": 4, "vocab": 256,
                "dropout": 0.0, "attention": "naive", "dtype": "fp32"}


def model_file(tmp, spec):
    """Writes a model spec as TMP/NAME.json; returns its path."""
    path = os.path.join(tmp, spec["name"] + ".json")
    with open(path, "w") as f:
        json.dump(spec, f)
    return path


def base(model):
    return ["--model", model, "--dtype", "fp32", "--seed", "5", "--warmup", "1", "--threads", "2"]


def load(d, name):
    with open(os.path.join(d, name)) as f:
        return json.load(f)


def bound_per_step(layers, kmax):
    return 2 * 4 * layers * kmax * U32


def single(b, tmp, model, steps, policy):
    out = os.path.join(tmp, ("%s-1-%s" % (model, policy)).replace(":", "_").replace("=", ""))
    b.run("run", *base(model), "--steps", steps, "--policy", policy, "--out", out)
    return load(out, "summary.json")


def layout_run(b, tmp, model, steps, policy, tp, sp, dp, ref, rel, tag="", extra=()):
    """Runs the layout and checks it; returns (losses, ranks.json) or (None, {})."""
    flags = ["--tp", tp] + (["--sp"] if sp else []) + (["--dp", dp] if dp > 1 else []) + list(extra)
    what = "%s T=%d%s D=%d %s%s" % (model, tp, " sp" if sp else "", dp, policy, "".join(" " + str(x) for x in extra))
    out = os.path.join(tmp, what.replace(" ", "_").replace("=", "").replace(":", "_") + tag)
    b.run("run", *base(model), "--steps", steps, "--policy", policy, *flags, "--out", out)
    if not os.path.isfile(os.path.join(out, "ranks.json")):
        check(False, "%s: no ranks.json" % what)
        return None, {}
    j = load(out, "ranks.json")
    check(j.get("complete") and j["world_size"] == tp * dp, "%s: complete, %d ranks: %r"
          % (what, tp * dp, j.get("error")))
    check(j.get("tp") == tp and j.get("dp") == dp and j.get("sp") == sp, "%s: ranks.json layout %r"
          % (what, {k: j.get(k) for k in ("tp", "dp", "sp")}))
    losses = j.get("warmup_loss", [])[:1] + j.get("loss", [])
    wanted = ref.get("warmup_loss", [])[:1] + ref.get("loss", [])
    check(len(losses) == len(wanted), "%s: %d losses, the single run %d" % (what, len(losses), len(wanted)))
    for k, (a, s) in enumerate(zip(losses, wanted)):
        bound = (k + 1) * rel * abs(s)
        check(abs(a - s) <= bound, "%s: loss %d %r vs one process %r, bound %g" % (what, k, a, s, bound))
    plan = b.json("plan", "--model", model, "--dtype", "fp32", "--policy", policy, *flags,
                  "--batch", 4 // dp, "--json")
    stage = (plan or {}).get("stages", [{}])[0]
    for r in j["ranks"]:
        check(r.get("tp_rank") == r["rank"] % tp and r.get("dp_rank") == r["rank"] // tp,
              "%s rank %d: tp/dp index %r/%r" % (what, r["rank"], r.get("tp_rank"), r.get("dp_rank")))
        check(r["peak_bytes"] == r["predicted_peak_bytes"], "%s rank %d: measured peak %d == predicted %d"
              % (what, r["rank"], r["peak_bytes"], r["predicted_peak_bytes"]))
        check(r["peak_bytes"] == stage.get("peak_bytes"), "%s rank %d: peak %d == plan's %r"
              % (what, r["rank"], r["peak_bytes"], stage.get("peak_bytes")))
        check(r["static_bytes"] == stage.get("static", {}).get("total"), "%s rank %d: static %d == plan's %r"
              % (what, r["rank"], r["static_bytes"], stage.get("static", {}).get("total")))
    return losses, j


def refusals(b, tmp):
    out = os.path.join(tmp, "refused")
    # tiny has 4 heads: 3 does not divide them; the message names both numbers.
    b.refuses(["run", *base("tiny"), "--tp", 3, "--out", out], "heads", "4", "3")
    dist = ["run", *base("tiny"), "--distribute-saved-activations", "--out", out]
    b.refuses(dist + ["--policy", "uniform:segments=4"], "needs tp > 1")
    b.refuses(dist + ["--tp", 2, "--sp", "--policy", "uniform:segments=4"], "sequence parallelism")
    b.refuses(dist + ["--tp", 2, "--policy", "none"], "block but the last recomputed")
    b.refuses(dist + ["--tp", 2, "--policy", "offload:what=checkpoints"], "host")
    # CUDA ranks: one GPU each, the GPU of the rank's local rank (so not cuda:N), and NCCL; a
    # machine without them is told before any process starts.
    b.refuses(["run", *base("tiny"), "--tp", 2, "--device", "cuda:1", "--out", out], "cuda:1", "--device cuda")
    if e2e_common.gpus() < 2:
        b.refuses(["run", *base("tiny"), "--tp", 2, "--device", "cuda", "--out", out], "--device cuda with 2 ranks")
    check(not os.path.exists(out), "a refused run leaves no directory")


def distributed(b, tmp, steps, rel):
    """--distribute-saved-activations: a checkpointed block input is kept as each rank's half and
    all-gathered before the recompute, so the recompute reads the same bits: the losses are the
    undistributed layout's bit for bit, and each rank holds less (3 of the 4 block inputs halved;
    the last block keeps its whole saved set)."""
    policy = "uniform:segments=4"
    ref = load(os.path.join(tmp, "tiny-1-uniform_segments4"), "summary.json")  # run above
    for dp in (1, 2):
        plain, pj = layout_run(b, tmp, "tiny", steps, policy, 2, False, dp, ref, rel, "-plain")
        dist, dj = layout_run(b, tmp, "tiny", steps, policy, 2, False, dp, ref, rel,
                              extra=("--distribute-saved-activations",))
        what = "T=2 D=%d %s distributed" % (dp, policy)
        check(dist is not None and dist == plain, "%s: the undistributed losses bit for bit: %r %r"
              % (what, dist, plain))
        if not (pj and dj):
            continue
        for p, d in zip(pj["ranks"], dj["ranks"]):
            check(d["peak_bytes"] < p["peak_bytes"], "%s rank %d: peak %d below the undistributed %d"
                  % (what, d["rank"], d["peak_bytes"], p["peak_bytes"]))
        out = os.path.join(tmp, ("tiny T=2 D=%d %s --distribute-saved-activations" % (dp, policy))
                           .replace(" ", "_").replace("=", "").replace(":", "_"))
        with open(os.path.join(out, "rank-0", "ops.csv")) as f:
            gathers = sum(1 for row in f if ".checkpoint.all_gather" in row)
        check(gathers > 0, "%s: the checkpoints' all-gathers are ops of rank 0 (%d)" % (what, gathers))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--steps", default="2")
    a = ap.parse_args()
    b = e2e_common.Batch(a.bin)
    with tempfile.TemporaryDirectory() as tmp:
        refusals(b, tmp)
        rel = bound_per_step(4, 512)
        ref = single(b, tmp, "tiny", a.steps, "none")
        first, _ = layout_run(b, tmp, "tiny", a.steps, "none", 2, False, 1, ref, rel)
        again, _ = layout_run(b, tmp, "tiny", a.steps, "none", 2, False, 1, ref, rel, "-again")
        check(first is not None and first == again, "two T=2 runs: identical losses %r %r" % (first, again))
        sp_none, _ = layout_run(b, tmp, "tiny", a.steps, "none", 2, True, 1, ref, rel)
        for policy in ("selective:modules=core_attn+mlp+layernorm", "uniform:layers=1"):
            got, _ = layout_run(b, tmp, "tiny", a.steps, policy, 2, True, 1, ref, rel)
            check(got is not None and got == sp_none, "T=2 sp %s: the losses of none bit for bit: %r %r"
                  % (policy, got, sp_none))
        layout_run(b, tmp, "tiny", a.steps, "none", 2, False, 2, ref, rel)
        for policy in ("selective", "uniform:segments=4"):  # segments = L: full per-block recomputation
            layout_run(b, tmp, "tiny", a.steps, policy, 2, False, 1, single(b, tmp, "tiny", a.steps, policy), rel)
        distributed(b, tmp, a.steps, rel)
        rel_llama = bound_per_step(4, 352)
        layout_run(b, tmp, "llama-tiny", a.steps, "none", 2, False, 1,
                   single(b, tmp, "llama-tiny", a.steps, "none"), rel_llama)
        olmo = model_file(tmp, OLMO2_SMALL)
        rel_olmo = bound_per_step(2, 128)
        olmo_ref = single(b, tmp, olmo, a.steps, "none")
        layout_run(b, tmp, olmo, a.steps, "none", 2, False, 1, olmo_ref, rel_olmo)
        layout_run(b, tmp, olmo, a.steps, "none", 2, True, 1, olmo_ref, rel_olmo)
        layout_run(b, tmp, olmo, a.steps, "selective", 2, False, 2,
                   single(b, tmp, olmo, a.steps, "selective"), rel_olmo)
        # Per-head QK-norm and the parallel block at T=2 with and without sp; Falcon's kv groups with sp.
        for spec, sps in ((QWEN3_SMALL, (False, True)), (NEOX_SMALL, (False, True)), (FALCON_SMALL, (True,))):
            model = model_file(tmp, spec)
            ref_model = single(b, tmp, model, a.steps, "none")
            for sp in sps:
                layout_run(b, tmp, model, a.steps, "none", 2, sp, 1, ref_model, rel_olmo)
        print("layouts checked: T=2, T=2 sp (none, selective by modules, uniform:layers=1), T=2 x D=2, selective, "
              "uniform:segments=4, llama-tiny, "
              "olmo2-small (QK-norm) T=2, T=2 sp, T=2 x D=2 selective, qwen3-small (per-head QK-norm) "
              "T=2, T=2 sp, neox-small (parallel block) T=2, T=2 sp, falcon-small (kv groups) T=2 sp")
    return e2e_common.exit_code("tensor-parallel runs ok")


if __name__ == "__main__":
    sys.exit(main())
