#!/usr/bin/env python3
"""End-to-end test of ZeRO in data-parallel runs (`run --dp D --zero K`), on the CPU with `tiny`
in fp32 and its dropout, 2 counted steps.

Numerics: at D = 2 every stage gives ZeRO-0's losses bit for bit (a sum of two ranks' values is
the same whichever buffer Gloo sums it in, and AdamW is element-wise, so updating a shard gives
the whole update's bits); against one process the bound of data_parallel_e2e.py holds:
|L_D - L_1| <= (k + 2) * 256 * 2^-24 * L_1 for counted step k. At D = 4 the gradient buckets
are summed in other buffers than ZeRO-0's one all-reduce, so only that bound is checked. Two
runs with one seed and layout are bitwise identical (losses, gradient checksums).

Memory: each rank's measured peak equals its predicted peak and `plan --dp D --zero K`'s, for
every stage under `none` and under full recomputation (uniform:segments=4, one segment per
block of tiny); static bytes per rank are 16n at ZeRO-0, 8n + 8c at 1, 4n + 12c at 2, 16c at 3
(n parameters, c = ceil(n / D)).

Communication: comm_bytes_per_step is what ops.csv's collectives move (plus the loss's 8-byte
all-reduce); at ZeRO-3 each block's parameters are gathered before its forward and backward,
and before its recompute under full recomputation: the extra gathered bytes are exactly the
recomputed blocks' parameter bytes, and the ratio is printed.

With tensor and sequence parallelism (T = 2, --sp, D = 2): ZeRO-3's losses are ZeRO-0's bit
for bit and its peak is plan's.

Refusals before any process starts: --zero without --dp > 1, --device cuda on a machine with fewer
GPUs than ranks (no directory left).
Weights and gradient files of ZeRO ranks: rank_weights_e2e.py.
Python standard library only.
"""
import argparse
import csv
import json
import os
import tempfile

import e2e_common
from e2e_common import check

BASE = ["--model", "tiny", "--dtype", "fp32", "--seed", "5", "--warmup", "1", "--threads", "2",
        "--steps", "2"]
TOKENS = 4 * 64  # tiny: batch 4, seq 64
U32 = 2.0 ** -24
FULL = "uniform:segments=4"


def load(path):
    with open(path) as f:
        return json.load(f)


def ops(rank_dir):
    with open(os.path.join(rank_dir, "ops.csv")) as f:
        return list(csv.DictReader(f))


class Runs:
    def __init__(self, b, tmp):
        self.b, self.tmp, self.n = b, tmp, 0

    def dist(self, d, zero, policy="none", tp=()):
        self.n += 1
        out = os.path.join(self.tmp, "r%d-d%d-z%d" % (self.n, d, zero))
        self.b.run("run", *BASE, "--dp", d, "--zero", zero, "--policy", policy, "--out", out, *tp)
        j = load(os.path.join(out, "ranks.json"))
        world = d * (int(tp[1]) if tp else 1)
        check(j["complete"] and j["world_size"] == world and j["zero"] == zero,
              "D=%d ZeRO-%d %s: complete, %d ranks, zero in ranks.json: %r" % (d, zero, tp, world, j.get("error")))
        return out, j

    def plan(self, d, zero, policy, tp=()):
        p = self.b.json("plan", "--model", "tiny", "--dtype", "fp32", "--dp", d, "--batch", 4 // d,
                        "--zero", zero, "--policy", policy, "--json", *tp)
        return (p or {}).get("stages", [{}])[0]


def check_memory(runs, out, j, d, zero, policy, tp=()):
    stage = runs.plan(d, zero, policy, tp)
    static = stage.get("static", {})
    n = static.get("param_elements", 0)
    c = -(-n // d)
    want = {0: 16 * n, 1: 8 * n + 8 * c, 2: 4 * n + 12 * c, 3: 16 * c}[zero]
    check(static.get("total") == want, "D=%d ZeRO-%d: plan's static bytes %r == %d (n %d, c %d)"
          % (d, zero, static.get("total"), want, n, c))
    for r in j["ranks"]:
        what = "D=%d ZeRO-%d %s rank %d" % (d, zero, policy, r["rank"])
        check(r["peak_bytes"] == r["predicted_peak_bytes"],
              "%s: measured peak %d == predicted %d" % (what, r["peak_bytes"], r["predicted_peak_bytes"]))
        check(r["peak_bytes"] == stage.get("peak_bytes"),
              "%s: peak %d == plan's %r" % (what, r["peak_bytes"], stage.get("peak_bytes")))
        check(r["static_bytes"] == want, "%s: static bytes %d == %d" % (what, r["static_bytes"], want))
        # What the collectives of the (identical) steps move, from the last step's ops.
        moved = sum(int(o["bytes"]) for o in ops(os.path.join(out, r["dir"]))
                    if o["op"] in ("all_reduce", "all_gather", "reduce_scatter"))
        if tp:
            continue  # two groups: the tensor-parallel exchanges are counted too
        check(r["comm_bytes_per_step"] == moved + 8,
              "%s: comm_bytes_per_step %d == ops.csv's collectives %d + the loss's 8"
              % (what, r["comm_bytes_per_step"], moved))


def check_losses(j, single, what, exact=None):
    check(len(j["loss"]) == len(single["loss"]), "%s: as many losses as one process" % what)
    for k, (a, s) in enumerate(zip(j["loss"], single["loss"])):
        bound = (k + 2) * TOKENS * U32 * abs(s)
        check(abs(a - s) <= bound, "%s: loss of step %d %r vs one process's %r, bound %g" % (what, k, a, s, bound))
    if exact is not None:
        check(j["loss"] == exact["loss"] and j["warmup_loss"] == exact["warmup_loss"],
              "%s: the losses of ZeRO-0 bit for bit: %r vs %r" % (what, j["loss"], exact["loss"]))


def gathers(rank_dir):
    """Bytes of the ZeRO-3 parameter gathers by (block, phase)."""
    g = {}
    for o in ops(rank_dir):
        if o["name"] == "zero.all_gather":
            key = (int(o["block"]), o["phase"])
            g[key] = g.get(key, 0) + int(o["bytes"])
    return g


def recomputed_blocks(rank_dir):
    """Blocks the schedule runs forward more than once (a recompute, or a forward replayed)."""
    seen, again = set(), set()
    for a in load(os.path.join(rank_dir, "schedule.json"))["actions"]:
        if a["action"] in ("forward", "recompute"):
            (again if a["block"] in seen or a["action"] == "recompute" else seen).add(a["block"])
    return sorted(again)


def expected_ratio(rank_dir, recomputed):
    """Gathered bytes under full recomputation over `none`'s, from the model's sizes: a GPT-2
    block holds 12h^2 + 13h parameters; the embedding's gather is (V + P)h, the head's (tied)
    Vh + 2h (the final norm); fp32."""
    m = load(os.path.join(rank_dir, "summary.json"))["model"]
    h, v, p, n = m["hidden"], m["vocab"], m["positions"], m["layers"]
    block = 4 * (12 * h * h + 13 * h)
    outer = 4 * ((v + p) * h) + 4 * (v * h + 2 * h)
    none = 2 * n * block + outer
    return (none + len(recomputed) * block) / none, block


def check_regather(none_dir, full_dir, none_j, full_j):
    gn, gf = gathers(none_dir), gathers(full_dir)
    blocks = sorted({b for b, _ in gn if b >= 0})
    check(blocks == [0, 1, 2, 3], "ZeRO-3 gathers every block of tiny: %r" % blocks)
    for b in blocks:
        size = gn.get((b, "forward"), 0)
        check(size > 0 and gn.get((b, "backward")) == size and (b, "recompute") not in gn,
              "none: block %d gathered before its forward and its backward only: %r" % (b, gn))
        check(gf.get((b, "forward")) == size and gf.get((b, "backward")) == size,
              "full recomputation: block %d gathered before its forward and backward" % b)
        check(gf.get((b, "recompute"), size) == size, "a recompute gathers the block's %d bytes" % size)
    recomputed = [b for b in blocks if (b, "recompute") in gf]
    check(len(recomputed) >= len(blocks) - 1, "full recomputation recomputes the blocks: %r" % recomputed)
    check(recomputed == recomputed_blocks(full_dir), "the recompute gathers are the schedule's recomputes: %r %r"
          % (recomputed, recomputed_blocks(full_dir)))
    want, block = expected_ratio(full_dir, recomputed)
    check(all(gn[(b, "forward")] == block for b in blocks), "a block's gather is its %d parameter bytes" % block)
    extra = sum(gn[(b, "forward")] for b in recomputed)
    total_n, total_f = sum(gn.values()), sum(gf.values())
    check(total_f - total_n == extra, "the re-gathered bytes %d == the recomputed blocks' parameters %d"
          % (total_f - total_n, extra))
    check(total_f / total_n == want, "gathered bytes full / none %r == %r from the model's sizes"
          % (total_f / total_n, want))
    comm_n = none_j["ranks"][0]["comm_bytes_per_step"]
    comm_f = full_j["ranks"][0]["comm_bytes_per_step"]
    check(comm_f - comm_n == extra, "communicated bytes per step grow by the re-gathers: %d - %d == %d"
          % (comm_f, comm_n, extra))
    print("ZeRO-3 D=2 tiny: gathered bytes per step none %d, full recomputation %d (x%.4f); "
          "communicated %d vs %d (x%.4f); %d of %d blocks recomputed"
          % (total_n, total_f, total_f / total_n, comm_n, comm_f, comm_f / comm_n, len(recomputed), len(blocks)))


def refusals(b, tmp):
    out = os.path.join(tmp, "refused")
    b.refuses(["run", *BASE, "--zero", 1, "--out", out], "zero", "--dp")
    if e2e_common.gpus() < 2:  # CUDA ranks need NCCL and a GPU each: told before any process starts
        b.refuses(["run", *BASE, "--dp", 2, "--zero", 1, "--device", "cuda", "--out", out], "--device cuda with 2 ranks")
    check(not os.path.exists(out), "a refused run leaves no directory")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    b = e2e_common.Batch(a.bin)
    with tempfile.TemporaryDirectory() as tmp:
        refusals(b, tmp)
        runs = Runs(b, tmp)
        one = os.path.join(tmp, "one")
        b.run("run", *BASE, "--out", one)
        single = load(os.path.join(one, "summary.json"))
        out0, z0 = runs.dist(2, 0)
        check_memory(runs, out0, z0, 2, 0, "none")
        check_losses(z0, single, "D=2 ZeRO-0")
        for zero in (1, 2, 3):
            out, j = runs.dist(2, zero)
            check_memory(runs, out, j, 2, zero, "none")
            check_losses(j, single, "D=2 ZeRO-%d" % zero, exact=z0)
            if zero == 3:
                none_out, none_j = out, j
        # Full recomputation at every stage: memory exact, and the ZeRO-3 re-gathers.
        for zero in (1, 2, 3):
            out, j = runs.dist(2, zero, FULL)
            check_memory(runs, out, j, 2, zero, FULL)
            check_losses(j, single, "D=2 ZeRO-%d %s" % (zero, FULL))
        check_regather(os.path.join(none_out, "rank-0"), os.path.join(out, "rank-0"), none_j, j)
        # Two runs, one layout: the same bits.
        again_out, again = runs.dist(2, 3)
        check(again["loss"] == none_j["loss"], "two ZeRO-3 runs: identical losses")
        for r in (0, 1):
            s1 = load(os.path.join(none_out, "rank-%d" % r, "summary.json"))
            s2 = load(os.path.join(again_out, "rank-%d" % r, "summary.json"))
            check(s1.get("grad_checksum") == s2.get("grad_checksum") and s1.get("grad_checksum"),
                  "two ZeRO-3 runs: rank %d's gradient shard has the same bits" % r)
        out, j = runs.dist(4, 3)
        check_memory(runs, out, j, 4, 3, "none")
        check_losses(j, single, "D=4 ZeRO-3")
        tp = ("--tp", "2", "--sp")
        _, t0 = runs.dist(2, 0, tp=tp)
        out, j = runs.dist(2, 3, FULL, tp=tp)
        check_memory(runs, out, j, 2, 3, FULL, tp)
        check(j["loss"] == t0["loss"], "T=2 sp D=2: ZeRO-3's losses are ZeRO-0's: %r %r" % (j["loss"], t0["loss"]))
    return e2e_common.exit_code("ZeRO runs ok")


if __name__ == "__main__":
    raise SystemExit(main())
