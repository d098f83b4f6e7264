#!/usr/bin/env python3
"""End-to-end test of bf16 runs of several ranks (`run --dtype bf16` with --dp, --zero, --tp,
--sp, --pp), on the CPU with `tiny` (bf16 activations, parameters and gradients, fp32 master
weights and moments).

The communicators sum fp32: for an all-reduce or reduce-scatter a bf16 tensor is cast to a
tracked fp32 copy, the collective runs on it, and the result is rounded back to bf16 once
(Executor::collective_f32; ops NAME.to_f32 / NAME.from_f32 around it). Gathers move the bf16
bits as they are.

Bit for bit:
* D = 2: the first loss is one process's (the forward has no collective), and ZeRO-1, 2 and 3
  give ZeRO-0's losses at every step (a sum of two values in fp32 does not depend on the buffer
  it is taken in; every stage rounds the same fp32 sums to bf16), and their --save-weights files
  are ZeRO-0's bytes (ZeRO-1 and 2 shard the fp32 master weights and keep the bf16 parameters
  whole; the file gathers the master shards).
* Two runs of the same layout are identical.

* T = 2 under full recomputation with and without distributed checkpoints.

Within a bound: T = 2, T = 2 with sp, P = 2 x T = 2 with sp, and P = 2 x D = 2 under ZeRO-2
and 3 (the tied embedding's two copies summed in the outer bucket) against one process. A
row-parallel output (and a column-parallel input gradient) is T partial products each rounded
to bf16 (unit roundoff u = 2^-8), summed in fp32 and rounded again, where one process rounds the
whole sum once: each of the n_lin = 4 * layers split sums is within 2u relative of one
process's, so, to first order and with the norms not amplifying a relative error (as in
tensor_parallel_e2e.py, gamma replaced by u), |L_T - L_1| <= (k + 1) * 2 * n_lin * u * L_1 after
k updates. That is loose (measured: about 1e-5 relative), so a second check takes bf16's own
scale: one process's bf16 loss differs from its fp32 loss by d_k at step k (the rounding of the
same activations); the layouts add roundings of the same kind and size, so their distance from
one process's bf16 loss stays within 8 d_k (measured: under 1 d_k). An fp32 copy of an
all-reduce not cast back (a sum lost) breaks it.

Memory: every rank's measured peak equals its predicted peak and `plan`'s for the same layout,
the fp32 copies included.
Python standard library only.
"""
import argparse
import json
import os
import sys
import tempfile

import e2e_common
from e2e_common import check

U_BF16 = 2.0 ** -8
NOISE_FACTOR = 8
BASE = ["--model", "tiny", "--dtype", "bf16", "--seed", "5", "--warmup", "1", "--threads", "2"]


def load(d, name):
    with open(os.path.join(d, name)) as f:
        return json.load(f)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def losses_of(j):
    return j.get("warmup_loss", [])[:1] + j.get("loss", [])


class Runs:
    def __init__(self, b, tmp, steps):
        self.b, self.tmp, self.steps, self.n = b, tmp, steps, 0

    def run(self, layout=(), files=(), dtype="bf16"):
        """Runs tiny in `dtype` under `layout` (and file options such as --save-weights PATH);
        returns (losses, ranks.json or summary.json, dir)."""
        self.n += 1
        out = os.path.join(self.tmp, "run-%d" % self.n)
        base = [dtype if x == "bf16" else x for x in BASE]
        self.b.run("run", *base, "--steps", self.steps, *layout, *files, "--out", out)
        name = "ranks.json" if layout else "summary.json"
        if not check(os.path.isfile(os.path.join(out, name)), "%r: no %s" % (layout, name)):
            return [], {}, out
        j = load(out, name)
        check(j.get("complete", True), "%r: complete: %r" % (layout, j.get("error")))
        if layout:
            self.memory(layout, j)
        return losses_of(j), j, out

    def memory(self, layout, j):
        args = list(layout)
        dp = int(args[args.index("--dp") + 1]) if "--dp" in args else 1
        pp = int(args[args.index("--pp") + 1]) if "--pp" in args else 1
        plan = self.b.json("plan", "--model", "tiny", "--dtype", "bf16", *args, "--batch", 4 // (dp * pp),
                           "--json") or {}
        stages = plan.get("stages", [])
        for r in j.get("ranks", []):
            peak = r.get("peak_bytes")
            check(peak is not None and peak == r.get("predicted_peak_bytes"),
                  "%r rank %d: measured peak %r == predicted %r" % (layout, r["rank"], peak, r.get("predicted_peak_bytes")))
            st = stages[r.get("pp_rank", 0)] if r.get("pp_rank", 0) < len(stages) else {}
            check(peak == st.get("peak_bytes"), "%r rank %d: peak %r == plan's %r"
                  % (layout, r["rank"], peak, st.get("peak_bytes")))


def within(losses, ref, rel, what):
    check(len(losses) == len(ref), "%s: %d losses, one process %d" % (what, len(losses), len(ref)))
    for k, (a, s) in enumerate(zip(losses, ref)):
        bound = (k + 1) * rel * abs(s)
        check(abs(a - s) <= bound, "%s: loss %d %r vs one process %r, bound %g" % (what, k, a, s, bound))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--steps", default="2")
    a = ap.parse_args()
    b = e2e_common.Batch(a.bin)
    with tempfile.TemporaryDirectory() as tmp:
        runs = Runs(b, tmp, a.steps)
        one, _, _ = runs.run()
        w0 = os.path.join(tmp, "zero0.safetensors")
        d0, _, d0_dir = runs.run(["--dp", 2], ["--save-weights", w0])
        check(bool(d0) and d0[:1] == one[:1], "D=2: the first loss is one process's bit for bit: %r %r"
              % (d0[:1], one[:1]))
        with open(os.path.join(d0_dir, "rank-0", "ops.csv")) as f:
            staged = sum(1 for row in f if "grads.all_reduce.to_f32" in row)
        check(staged > 0, "D=2: the gradients' all-reduce runs on an fp32 copy (ops.csv has %d)" % staged)
        again, _, _ = runs.run(["--dp", 2])
        check(again == d0, "two D=2 runs: identical losses %r %r" % (again, d0))
        for zero in (1, 2, 3):
            wz = os.path.join(tmp, "zero%d.safetensors" % zero)
            z, _, z_dir = runs.run(["--dp", 2, "--zero", zero], ["--save-weights", wz])
            check(z == d0, "D=2 ZeRO-%d: ZeRO-0's losses bit for bit: %r %r" % (zero, z, d0))
            check(os.path.isfile(wz) and os.path.isfile(w0) and read_bytes(wz) == read_bytes(w0),
                  "D=2 ZeRO-%d: the saved weights (the master weights' shards gathered) are ZeRO-0's bytes" % zero)
            if zero == 3:  # the parameters' gathers move bf16 bits: no fp32 copy, two bytes an element
                with open(os.path.join(z_dir, "rank-0", "ops.csv")) as f:
                    rows = [row for row in f if ",zero.all_gather" in row]
                check(rows and not any("to_f32" in row for row in rows),
                      "D=2 ZeRO-3: the parameters are gathered without an fp32 copy (%d rows)" % len(rows))
        rel = 2 * 4 * 4 * U_BF16
        fp32, _, _ = runs.run(dtype="fp32")
        noise = [abs(x - y) for x, y in zip(one, fp32)]  # one process's own bf16 rounding, per step
        check(len(noise) == len(one) and all(n > 0 for n in noise), "bf16 and fp32 losses differ: %r" % noise)
        for layout in (["--tp", 2], ["--tp", 2, "--sp"], ["--tp", 2, "--sp", "--pp", 2],
                       ["--pp", 2, "--dp", 2, "--zero", 2], ["--pp", 2, "--dp", 2, "--zero", 3]):
            got, _, _ = runs.run(layout)
            what = "bf16 %s" % " ".join(map(str, layout))
            within(got, one, rel, what)
            for k, (a, s) in enumerate(zip(got, one)):
                check(abs(a - s) <= NOISE_FACTOR * noise[k], "%s: loss %d %r vs one process %r: %.3g, over %d x the "
                      "one-process bf16-vs-fp32 difference %.3g" % (what, k, a, s, abs(a - s), NOISE_FACTOR, noise[k]))
        # Distributed checkpoints in bf16: the undistributed losses bit for bit.
        full = ["--policy", "uniform:segments=4", "--tp", 2]
        plain, _, _ = runs.run(full)
        dist, _, _ = runs.run(full + ["--distribute-saved-activations"])
        check(bool(plain) and dist == plain, "bf16 T=2 distributed checkpoints: the losses without them: %r %r"
              % (dist, plain))
        print("bf16 layouts checked: D=2 (twice), D=2 ZeRO-1/2/3, T=2, T=2 sp, P=2 x T=2 sp, P=2 x D=2 ZeRO-2/3, "
              "T=2 distributed checkpoints")
    return e2e_common.exit_code("bf16 runs of several ranks ok")


if __name__ == "__main__":
    sys.exit(main())
