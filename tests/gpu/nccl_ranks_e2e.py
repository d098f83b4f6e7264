#!/usr/bin/env python3
"""End-to-end test of CUDA ranks on NCCL (`run --device cuda` with --tp, --sp, --dp, --zero,
--pp), one GPU per rank; exits 77 (skipped) on a machine with fewer than two usable GPUs
(`nvidia-smi -L`), and runs the 4-rank layouts only where there are four.

`tiny` in fp32 with its dropout, seed 5, one warmup and two counted steps, against one CUDA
process of the same global batch:
- Losses within the bound the CPU layouts state (tests/e2e/tensor_parallel_e2e.py): the ranks
  draw the single process's dropout masks (keyed by global element position) and hold slices
  of its initialization, so only the order of sums differs; a row-parallel linear's sum of
  K = ffn terms split in T partial sums is within 2 * gamma_K of the whole one, n_lin = 4 *
  layers such sums a step, and each update carries that error once more: |L - L_1| <= (k + 1) *
  2 * n_lin * K * 2^-24 * L_1 at counted step k (data-parallel and pipeline layouts sum the
  gradients over ranks and micro-batches instead, a smaller error of the same form). A wrong
  slice, a missing all-reduce or dropout masks keyed by the rank's own positions are off by
  1e-2 and more.
- Two runs of one layout (D = 2) are bitwise identical; ZeRO-1 gives ZeRO-0's losses bit for
  bit (the same all-reduce, then each shard's AdamW).
- Every rank's measured peak equals its predicted peak; every rank communicates, and its
  provenance names NCCL.
- A rank killed mid-run ends the job (exit 1, the rank named, no rank process left).
Python standard library only.
"""
import argparse
import json
import os
import signal
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import e2e_common  # noqa: E402
from e2e_common import check  # noqa: E402

U32 = 2.0 ** -24
BASE = ["--model", "tiny", "--dtype", "fp32", "--seed", "5", "--warmup", "1", "--steps", "2",
        "--device", "cuda"]
LAYERS, FFN = 4, 512  # tiny


def load(d, name):
    with open(os.path.join(d, name)) as f:
        return json.load(f)


def provenance(summary):
    p = summary.get("provenance", {})
    return p if isinstance(p, dict) else {k: v for k, v in p}


def layout(b, tmp, name, extra, one, bound):
    out = os.path.join(tmp, name)
    b.run("run", *BASE, *extra, "--out", out)
    j = load(out, "ranks.json")
    if not check(j.get("complete"), "%s: complete: %r" % (name, j.get("error"))):
        return None
    for k, (a, s) in enumerate(zip(j["loss"], one["loss"])):
        lim = (k + 1) * bound * abs(s)
        check(abs(a - s) <= lim, "%s: loss of step %d %r vs one process's %r, bound %g" % (name, k, a, s, lim))
    for r in j["ranks"]:
        check(r["peak_bytes"] == r["predicted_peak_bytes"], "%s rank %d: measured peak %d == predicted %d"
              % (name, r["rank"], r["peak_bytes"], r["predicted_peak_bytes"]))
        check(r.get("comm_bytes_per_step", 0) > 0, "%s rank %d communicates" % (name, r["rank"]))
        coll = provenance(load(os.path.join(out, r["dir"]), "summary.json")).get("collectives", "")
        check(coll.startswith("nccl"), "%s rank %d: collectives %r" % (name, r["rank"], coll))
    return j


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    n = e2e_common.gpus()
    if n < 2:
        print("skipped: CUDA ranks need two GPUs, found %d" % n)
        return 77
    b = e2e_common.Batch(a.bin)
    bound = 2 * 4 * LAYERS * FFN * U32
    with tempfile.TemporaryDirectory() as tmp:
        one = load_single(b, tmp)
        layout(b, tmp, "tp2", ["--tp", "2"], one, bound)
        layout(b, tmp, "tp2-sp", ["--tp", "2", "--sp"], one, bound)
        layout(b, tmp, "tp2-flash", ["--tp", "2", "--attention", "flash"], load_single(b, tmp, "flash"), bound)
        d0 = layout(b, tmp, "dp2", ["--dp", "2"], one, bound)
        again = layout(b, tmp, "dp2-again", ["--dp", "2"], one, bound)
        if d0 and again:
            check(d0["loss"] == again["loss"], "two D=2 runs: identical losses %r %r" % (d0["loss"], again["loss"]))
        z1 = layout(b, tmp, "dp2-zero1", ["--dp", "2", "--zero", "1"], one, bound)
        if d0 and z1:
            check(z1["loss"] == d0["loss"], "ZeRO-1 gives ZeRO-0's losses bit for bit: %r %r" % (z1["loss"], d0["loss"]))
        layout(b, tmp, "dp2-zero2", ["--dp", "2", "--zero", "2"], one, bound)
        layout(b, tmp, "dp2-zero3", ["--dp", "2", "--zero", "3", "--policy", "uniform:segments=4"],
               load_single(b, tmp, "uniform:segments=4"), bound)
        layout(b, tmp, "pp2", ["--pp", "2", "--micro-batches", "2"], one, bound)
        if n >= 4:
            layout(b, tmp, "pp2-tp2-sp", ["--pp", "2", "--tp", "2", "--sp"], one, bound)
            layout(b, tmp, "pp2-dp2-zero2", ["--pp", "2", "--dp", "2", "--zero", "2"], one, bound)
        got = e2e_common.fail_rank(b, [*BASE[:-4], "--steps", "100000", "--device", "cuda", "--dp", "2",
                                       "--dist-timeout", "20", "--out", os.path.join(tmp, "killed")],
                                   1, signal.SIGKILL, settle=5.0)
        if got is not None:
            code, err, took = got
            check(code == 1 and "rank 1" in err, "a killed rank ends the job naming it: %d %r" % (code, err[-300:]))
    return e2e_common.exit_code("CUDA ranks on NCCL ok (%d GPUs)" % n)


def load_single(b, tmp, policy_or_attention="none"):
    extra = ["--attention", "flash"] if policy_or_attention == "flash" else ["--policy", policy_or_attention]
    out = os.path.join(tmp, "one-" + policy_or_attention.replace(":", "_").replace("=", ""))
    b.run("run", *BASE, *extra, "--out", out)
    return load(out, "summary.json")


if __name__ == "__main__":
    sys.exit(main())
