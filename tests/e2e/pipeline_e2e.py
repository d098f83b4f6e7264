#!/usr/bin/env python3
"""End-to-end test of pipeline-parallel runs (`run --pp P --micro-batches N [--dp D] [--tp T]`),
on the CPU with `tiny` (4 blocks, batch 4, seq 64) in fp32 and its dropout, and `llama-tiny`.

Numerics: P = 2 with N = 2, P = 2 with N = 4 and D = 2 (batch 8), P = 2 x T = 2 (with and
without sp), llama-tiny (RoPE, SwiGLU, grouped-query attention, an untied head) at P = 2, and
P = 3 with N = 4 and --first-stage-layers 2 (stages of 2, 1 and 1 blocks), P = 2 x T = 2 with
distributed checkpoints (the losses without them bit for bit), and P = 2 with
N = 2 and D = 2 under ZeRO-1, 2 and 3 (tied and untied heads, with and without recomputation) give the
single-process losses (same global batch) within an fp32 reduction-order bound. A stage holds
bitwise the single process's initial values of its parameters and draws its masks at global
positions, so what differs is the order of sums: the weight gradients are sums over the step's
tokens, split in N micro-batches (and D replicas) of B·S/(N·D) tokens whose partial sums are
added, instead of one GEMM's sum over all B·S. As in the data-parallel test, each such sum is
within gamma_n = n·2^-24 of the exact one relative to the sum of its terms' magnitudes, so the
step's update differs by at most about B·S·2^-24 relative and the loss after k updates by
(k + 1)·B·S·2^-24 relative (first order). With T = 2 the tensor-parallel bound of
tensor_parallel_e2e.py (2·4·L·K_max·2^-24 a step) is added. Both are loose against the ~1e-8
seen and tight against a wrong stage cut, a lost micro-batch or a missing gradient sum (1e-2 and
more). Two runs with the same seed and layout are bitwise identical.

Reading: `compare` reads the directory and every rank's directory (a stage's block table, its
schedule once per micro-batch).

Memory: every rank's measured peak equals its predicted peak and `plan --pp P --micro-batches N`
for the same layout (its stage's peak and static bytes), under `none` and
`uniform:segments=2` (each stage's two blocks recomputed); plan's stage p holds min(P − p, N)
micro-batches in flight.

A load-balancing loss across stages: the published Qwen3-30B-A3B config.json at small sizes (4
layers, layer 2 dense, 8 experts top-2) with output_router_logits and router_aux_loss_coef 0.05,
at P = 2 with N = 2 (and x D = 2): stages of 2 and 2 blocks give the losses of stages of 1 and 3
bit for bit (each micro-batch's loss counts every stage's routing of it: a stage's statistics
lost or its gradient not sent back changes them), every rank's peak = predicted = plan's,
Megatron-LM's `moe` recomputation gives none's losses bit for bit, and without the coefficient
the losses differ (by about the loss's 0.1).

A layer without RoPE (llama-tiny, block 3 of a kind without it) at P = 2 x T = 2: the
single-process losses within the bound above, every rank's peak = predicted = plan's, and
`selective:modules=core_attn+mlp` with none's losses bit for bit.

Recomputation on stages (P = 2, N = 2): `selective`, `selective:modules=core_attn+mlp`,
`uniform:layers=1` and `block:layers=1` (Megatron-LM's selective and full recomputation), each
with every rank's peak = predicted = plan's, the losses of `none` at P = 2 bit for bit, and each
rank's saved bytes per block one micro-batch's: plan's, which recomputes nothing in a
micro-batch's forward.

Refusals before any process starts: layers not divisible by P, fewer micro-batches than stages,
a batch not divisible by D·N (with ZeRO too), --micro-batches without --pp.
Failure: the last stage's rank killed with SIGKILL mid-run ends the job (exit 1) naming the rank,
leaves no process behind and a ranks.json that says the run did not complete.
Python standard library only.
"""
import argparse
import json
import os
import shutil
import signal
import sys
import tempfile

import e2e_common
from e2e_common import check

U32 = 2.0 ** -24
BASE = ["--model", "tiny", "--dtype", "fp32", "--seed", "5", "--warmup", "1", "--threads", "2"]


def base(model):
    return ["--model", model] + BASE[2:]


def load(d, name):
    with open(os.path.join(d, name)) as f:
        return json.load(f)


def losses_of(j):
    return j.get("warmup_loss", [])[:1] + j.get("loss", [])


def single(b, tmp, steps, policy, batch, model="tiny"):
    out = os.path.join(tmp, ("one-%s-%s-b%d" % (os.path.basename(model), policy, batch)).replace(":", "_").replace("=", ""))
    b.run("run", *base(model), "--steps", steps, "--policy", policy, "--batch", batch, "--out", out)
    return losses_of(load(out, "summary.json"))


def layout_run(b, tmp, steps, policy, pp, n, dp, tp, batch, ref, rel, tag="", sp=False, model="tiny", extra=()):
    flags = (["--pp", pp, "--micro-batches", n] + (["--dp", dp] if dp > 1 else []) + (["--tp", tp] if tp > 1 else [])
             + (["--sp"] if sp else []) + list(extra))
    what = "%s P=%d N=%d D=%d T=%d%s %s%s" % (os.path.basename(model), pp, n, dp, tp, " sp" if sp else "", policy,
                                            "".join(" " + str(x) for x in extra))
    out = os.path.join(tmp, what.replace(" ", "_").replace("=", "").replace(":", "_") + tag)
    b.run("run", *base(model), "--steps", steps, "--policy", policy, "--batch", batch, *flags, "--out", out)
    if not check(os.path.isfile(os.path.join(out, "ranks.json")), "%s: ranks.json" % what):
        return None
    j = load(out, "ranks.json")
    world = pp * dp * tp
    check(j.get("complete") and j.get("world_size") == world, "%s: complete, %d ranks: %r" % (what, world, j.get("error")))
    check(j.get("pp") == pp and j.get("micro_batches") == n and j.get("dp") == dp and j.get("tp") == tp,
          "%s: ranks.json layout %r" % (what, {k: j.get(k) for k in ("pp", "micro_batches", "dp", "tp")}))
    losses = losses_of(j)
    check(ref is None or len(losses) == len(ref), "%s: %d losses, the reference %d" % (what, len(losses), len(ref or [])))
    for k, (a, s) in enumerate(zip(losses, ref or [])):
        bound = (k + 1) * rel * abs(s)
        check(abs(a - s) <= bound, "%s: loss %d %r vs the reference %r, bound %g" % (what, k, a, s, bound))
    plan = b.json("plan", "--model", model, "--dtype", "fp32", "--policy", policy, *flags,
                  "--batch", batch // (dp * n), "--json") or {}
    stages = plan.get("stages", [])
    check(len(stages) == pp, "%s: plan has %d stages" % (what, len(stages)))
    for i, st in enumerate(stages):
        check(st.get("in_flight") == min(pp - i, n), "%s: plan's stage %d holds %r micro-batches, want %d"
              % (what, i, st.get("in_flight"), min(pp - i, n)))
    for r in j["ranks"]:
        rank = r["rank"]
        want = {"tp_rank": rank % tp, "dp_rank": (rank // tp) % dp, "pp_rank": rank // (tp * dp)}
        check(all(r.get(k) == v for k, v in want.items()), "%s rank %d: indices %r, want %r"
              % (what, rank, {k: r.get(k) for k in want}, want))
        check(r["peak_bytes"] == r["predicted_peak_bytes"], "%s rank %d: measured peak %d == predicted %d"
              % (what, rank, r["peak_bytes"], r["predicted_peak_bytes"]))
        st = stages[want["pp_rank"]] if want["pp_rank"] < len(stages) else {}
        check(r["peak_bytes"] == st.get("peak_bytes"), "%s rank %d: peak %d == plan's stage %d %r"
              % (what, rank, r["peak_bytes"], want["pp_rank"], st.get("peak_bytes")))
        check(r["static_bytes"] == st.get("static", {}).get("total"), "%s rank %d: static %d == plan's %r"
              % (what, rank, r["static_bytes"], st.get("static", {}).get("total")))
        # One micro-batch's saved bytes per block, as plan's one micro-batch of the stage.
        mbs = plan.get("micro_batch", [])
        want_saved = mbs[st["micro_batch"]].get("saved_bytes_per_block") if st.get("micro_batch", -1) < len(mbs) else None
        got_saved = load(os.path.join(out, "rank-%d" % rank), "summary.json").get("saved_bytes_per_block")
        check(got_saved == want_saved, "%s rank %d: saved bytes per block %r == plan's one micro-batch %r"
              % (what, rank, got_saved, want_saved))
    # The directory and every rank's own directory read back (compare checks each against its
    # stage's block table, the schedule run once per micro-batch).
    p = b.run("compare", out, *[os.path.join(out, "rank-%d" % r["rank"]) for r in j["ranks"]])
    check(p.returncode == 0 and ("pp %d" % pp) in p.stdout, "%s: compare reads the ranks: %r" % (what, p.stderr.strip()))
    if not tag and policy == "none" and model == "tiny" and not sp and pp == 2:
        # A stage's schedule.csv with one micro-batch's last action counted as another is refused.
        cut = os.path.join(tmp, "cut-" + os.path.basename(out))
        shutil.copytree(os.path.join(out, "rank-0"), cut)
        with open(os.path.join(cut, "schedule.csv")) as f:
            rows = f.read().splitlines()
        # tiny's 2-block stages: actions 2 and 3 are the backwards of blocks 1 and 0.
        last = max(i for i, row in enumerate(rows) if row.startswith("3,backward,0,"))
        rows[last] = "2,backward,1," + rows[last].split(",", 3)[3]
        with open(os.path.join(cut, "schedule.csv"), "w") as f:
            f.write("\n".join(rows) + "\n")
        b.refuses(["compare", cut], "schedule.csv", "once per micro-batch")
    return losses


def nope_model(b, tmp):
    """llama-tiny's JSON with its block 3 of a layer kind without RoPE (the second stage's
    second block: the stages' tables differ), written to tmp."""
    m = [x for x in b.json("list", "models", "--json") if x["name"] == "llama-tiny"][0]
    m.update(name="llama-tiny-nope", layer_kinds=[{"name": "rope"}, {"name": "nope", "rope": False}],
             layer_pattern=["rope", "rope", "rope", "nope"])
    path = os.path.join(tmp, "llama-tiny-nope.json")
    with open(path, "w") as f:
        json.dump(m, f)
    return path


def aux_moe_model(tmp, coef):
    """The published Qwen3-30B-A3B config.json at small sizes, its load-balancing loss on at `coef`
    (output_router_logits), written to tmp."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "hf-configs", "qwen3-30b-a3b.json")
    with open(src) as f:
        cfg = json.load(f)
    cfg.update(hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_attention_heads=4,
               num_key_value_heads=2, head_dim=16, num_hidden_layers=4, num_experts=8, num_experts_per_tok=2,
               vocab_size=256, max_position_embeddings=64, mlp_only_layers=[2], output_router_logits=coef > 0,
               router_aux_loss_coef=coef)
    path = os.path.join(tmp, "qwen3-moe-aux-%g.json" % coef)
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def aux_across_stages(b, tmp, steps):
    """The load-balancing loss of a micro-batch counts every layer's routing of that micro-batch
    (as a gradient-accumulation step of Hugging Face's computes it per forward), so a layout's
    reference is not one process's whole batch but the same micro-batches under another stage
    cut: the blocks' arithmetic and the gradients' sums are the same, bit for bit, whichever stage
    holds a layer, if and only if every stage's statistics reach the loss and its gradient reaches
    every stage."""
    moe, plain = aux_moe_model(tmp, 0.05), aux_moe_model(tmp, 0.0)
    cut = ("--first-stage-layers", 1)  # stages of 1 and 3 blocks: the dense layer 2 on stage 1
    for d, batch in ((1, 4), (2, 8)):
        ref = layout_run(b, tmp, steps, "none", 2, 2, d, 1, batch, None, 0.0, model=moe, extra=cut)
        if ref is None:
            continue
        layout_run(b, tmp, steps, "none", 2, 2, d, 1, batch, ref, 0.0, model=moe)
        if d == 1:
            layout_run(b, tmp, steps, "selective:modules=moe", 2, 2, 1, 1, batch, ref, 0.0, model=moe)
            without = layout_run(b, tmp, steps, "none", 2, 2, 1, 1, batch, None, 0.0, model=plain)
            check(without is not None and abs(without[0] - ref[0]) > 1e-3,
                  "the load-balancing loss matters: %r without it, %r with it" % (without, ref))


def refusals(b, tmp):
    out = os.path.join(tmp, "refused")
    run = ["run", "--model", "tiny", "--dtype", "fp32", "--steps", "1", "--out", out]
    b.refuses(run + ["--pp", 3, "--micro-batches", 4], "layers 4", "pp 3")
    b.refuses(run + ["--pp", 2, "--micro-batches", 1], "1 micro-batches", "2 pipeline stages")
    b.refuses(run + ["--pp", 2, "--micro-batches", 3], "batch of 4", "--micro-batches 3")
    b.refuses(run + ["--micro-batches", 2], "micro-batches", "--pp")
    b.refuses(run + ["--pp", 2, "--dp", 2, "--zero", 1, "--batch", 6], "batch of 6")
    check(not os.path.exists(out), "a refused run leaves no directory")


def killed_stage(b, tmp):
    out = os.path.join(tmp, "killed")
    got = e2e_common.fail_rank(b, [*BASE, "--steps", 100000, "--pp", 2, "--micro-batches", 2, "--dist-timeout", 20,
                                   "--out", out], 1, signal.SIGKILL)
    if got is None:
        return
    code, err, took = got
    check(took < 30, "the job ended within the timeout (%.1f s)" % took)
    check(code == 1, "exit code 1 after a stage rank failed, got %d" % code)
    check("rank 1 was killed by signal 9" in err, "the message names rank 1 and its signal: %r" % err.strip())
    if check(os.path.isfile(os.path.join(out, "ranks.json")), "the run directory has ranks.json"):
        j = load(out, "ranks.json")
        check(j["complete"] is False and j["status"] == "error", "ranks.json says the run did not complete")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--steps", default="2")
    a = ap.parse_args()
    b = e2e_common.Batch(a.bin)
    with tempfile.TemporaryDirectory() as tmp:
        refusals(b, tmp)
        tokens4, tokens8 = 4 * 64, 8 * 64
        ref4 = single(b, tmp, a.steps, "none", 4)
        seg4 = single(b, tmp, a.steps, "uniform:segments=2", 4)
        first = layout_run(b, tmp, a.steps, "none", 2, 2, 1, 1, 4, ref4, tokens4 * U32)
        again = layout_run(b, tmp, a.steps, "none", 2, 2, 1, 1, 4, ref4, tokens4 * U32, "-again")
        check(first is not None and first == again, "two P=2 runs: identical losses %r %r" % (first, again))
        layout_run(b, tmp, a.steps, "uniform:segments=2", 2, 2, 1, 1, 4, seg4, tokens4 * U32)
        # Megatron-LM's recomputation on the stages: the losses of none at P=2, bit for bit.
        for policy in ("selective", "selective:modules=core_attn+mlp", "uniform:layers=1", "block:layers=1"):
            got = layout_run(b, tmp, a.steps, policy, 2, 2, 1, 1, 4, ref4, tokens4 * U32)
            check(got is not None and got == first, "P=2 %s: the losses of none at P=2 bit for bit: %r %r"
                  % (policy, got, first))
        ref8 = single(b, tmp, a.steps, "none", 8)
        layout_run(b, tmp, a.steps, "none", 2, 4, 2, 1, 8, ref8, tokens8 * U32)
        # ZeRO over each stage's two replicas: stage 1 shards the moments, 2 the gradients too
        # (a block's reduce-scattered once per micro-batch and added up, the outer ones once a
        # step after the tied embedding's sum), 3 the parameters too (gathered per micro-batch).
        for zero in (1, 2, 3):
            layout_run(b, tmp, a.steps, "none", 2, 2, 2, 1, 8, ref8, tokens8 * U32, extra=("--zero", zero))
        layout_run(b, tmp, a.steps, "uniform:segments=2", 2, 2, 2, 1, 8,
                   single(b, tmp, a.steps, "uniform:segments=2", 8), tokens8 * U32, extra=("--zero", 3))
        layout_run(b, tmp, a.steps, "none", 2, 2, 2, 1, 8, single(b, tmp, a.steps, "none", 8, "llama-tiny"),
                   tokens8 * U32, model="llama-tiny", extra=("--zero", 2))
        layout_run(b, tmp, a.steps, "none", 2, 2, 1, 2, 4, ref4, tokens4 * U32 + 2 * 4 * 4 * 512 * U32)
        layout_run(b, tmp, a.steps, "none", 2, 2, 1, 2, 4, ref4, tokens4 * U32 + 2 * 4 * 4 * 512 * U32, sp=True)
        # Distributed checkpoints on stages: the same bits as without them.
        plain = layout_run(b, tmp, a.steps, "uniform:segments=2", 2, 2, 1, 2, 4, seg4,
                           tokens4 * U32 + 2 * 4 * 4 * 512 * U32)
        dist = layout_run(b, tmp, a.steps, "uniform:segments=2", 2, 2, 1, 2, 4, seg4,
                          tokens4 * U32 + 2 * 4 * 4 * 512 * U32, extra=("--distribute-saved-activations",))
        check(plain is not None and plain == dist, "P=2 x T=2 distributed checkpoints: the losses without them "
              "bit for bit: %r %r" % (dist, plain))
        layout_run(b, tmp, a.steps, "none", 2, 2, 1, 1, 4, single(b, tmp, a.steps, "none", 4, "llama-tiny"),
                   tokens4 * U32, model="llama-tiny")
        # A layer without RoPE (llama-tiny's block 3): each stage and rank walks its own blocks'
        # tables, and compare reads each rank's directory against them; Megatron-LM's
        # recomputation gives none's bits.
        nope = nope_model(b, tmp)
        nope_ref = single(b, tmp, a.steps, "none", 4, nope)
        nope_none = layout_run(b, tmp, a.steps, "none", 2, 2, 1, 2, 4, nope_ref, tokens4 * U32 + 2 * 4 * 4 * 512 * U32,
                               model=nope)
        for policy in ("selective:modules=core_attn+mlp",):
            got = layout_run(b, tmp, a.steps, policy, 2, 2, 1, 2, 4, nope_ref, tokens4 * U32 + 2 * 4 * 4 * 512 * U32,
                             model=nope)
            check(got is not None and got == nope_none, "no-RoPE layers P=2 x T=2 %s: the losses of none bit for bit: "
                  "%r %r" % (policy, got, nope_none))
        # Three stages, the first with 2 of the 4 blocks, the others 1 each.
        layout_run(b, tmp, a.steps, "none", 3, 4, 1, 1, 4, ref4, tokens4 * U32, extra=("--first-stage-layers", 2))
        aux_across_stages(b, tmp, a.steps)
        killed_stage(b, tmp)
        print("layouts checked: P=2 N=2 (twice), P=2 N=2 uniform:segments=2, selective (tensors and modules), "
              "uniform:layers=1 and block:layers=1, P=2 N=4 x D=2, P=2 x T=2, "
              "P=2 x T=2 sp, P=2 x T=2 distributed checkpoints, llama-tiny P=2, P=3 N=4 --first-stage-layers 2, "
              "P=2 x D=2 ZeRO-1/2/3, layers without RoPE at P=2 x T=2 (none, core_attn+mlp), a load-balancing loss "
              "at P=2 (none, moe) and P=2 x D=2")
    return e2e_common.exit_code("pipeline-parallel runs ok")


if __name__ == "__main__":
    sys.exit(main())
