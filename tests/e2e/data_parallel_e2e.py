#!/usr/bin/env python3
"""End-to-end test of data-parallel runs (`run --dp D`), on the CPU with `tiny` in fp32 and its
dropout.

Numerics: D = 2 and D = 4 give the single-process losses. The warmup step (before any update)
runs the single process's per-sequence model with the same dropout masks, but each rank's GEMMs
have fewer rows than the single process's, and the BLAS kernel's blocking (so the order in which
it sums each output's K products) follows the call's shape: OpenBLAS's Haswell kernels give a row
other bits when the call it is in has another number of rows. Each such dot product of length
K is off by at most gamma_K = K * 2^-24 of the sum of its terms' magnitudes (Higham); K <= 4h = 512
here, so gamma_512 = 2 * 256 * 2^-24, and to first order the loss carries that once: we allow
2 * 256 * 2^-24 relative for the warmup. A counted step
k comes after k updates whose gradients were
summed in another order (the ranks' halves, then Gloo's sum): each gradient element is a sum
over the B*S = 256 tokens, off by at most gamma_256 = 256 * 2^-24 of the sum of its terms'
magnitudes (Higham), and to first order each step carries that once more into the weights and
the loss: |L_D - L_1| <= (k + 2) * 256 * 2^-24 * L_1 (the warmup's share, then 1.5e-5 relative per
step). Two D = 2 runs
with the same seed are bitwise identical (losses and saved weights).

Memory: each rank's measured peak equals its predicted peak and `plan --dp D` (its stage's peak
and static bytes).

Refusals before any process starts: a batch not divisible by D, ZeRO without D > 1 (bf16 runs:
bf16_ranks_e2e.py).
Another launcher's ranks (torchrun's environment variables) join each other and give the same
losses bit for bit; a local rank past the world is refused.
Failure: a rank killed with SIGKILL mid-run, or stopped with SIGSTOP (a hang: its peer's
collective times out after --dist-timeout), ends the job (exit 1) naming the rank, leaves no
process behind and a run directory whose ranks.json says it did not complete.
Python standard library only.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile

import e2e_common
from e2e_common import check

BASE = ["--model", "tiny", "--dtype", "fp32", "--seed", "5", "--warmup", "1", "--threads", "2"]
TOKENS = 4 * 64  # tiny: batch 4, seq 64
U32 = 2.0 ** -24


def ranks_json(d):
    with open(os.path.join(d, "ranks.json")) as f:
        return json.load(f)


def summary(d):
    with open(os.path.join(d, "summary.json")) as f:
        return json.load(f)


def numerics(b, tmp, steps):
    single = summary_of_run(b, tmp, "d1", steps, [])
    for d in (2, 4):
        out = os.path.join(tmp, "d%d" % d)
        b.run("run", *BASE, "--steps", steps, "--dp", d, "--out", out)
        j = ranks_json(out)
        check(j["complete"] and j["world_size"] == d, "D=%d: complete, %d ranks: %r" % (d, d, j.get("error")))
        w0, w1 = j["warmup_loss"][0], single["warmup_loss"][0]
        check(abs(w0 - w1) <= 2 * TOKENS * U32 * abs(w1),
              "D=%d: warmup loss %r vs %r (same masks, same rows), bound %g" % (d, w0, w1, 2 * TOKENS * U32 * abs(w1)))
        for k, (a, s) in enumerate(zip(j["loss"], single["loss"])):
            bound = (k + 2) * TOKENS * U32 * abs(s)
            check(abs(a - s) <= bound, "D=%d: loss of step %d %r vs %r, bound %g" % (d, k, a, s, bound))
        check(len(j["loss"]) == len(single["loss"]), "D=%d: as many losses as the single run" % d)
        plan = b.json("plan", "--model", "tiny", "--dtype", "fp32", "--dp", d, "--batch", 4 // d, "--json")
        stage = (plan or {}).get("stages", [{}])[0]
        for r in j["ranks"]:
            check(r["peak_bytes"] == r["predicted_peak_bytes"], "D=%d rank %d: measured peak %d == predicted %d"
                  % (d, r["rank"], r["peak_bytes"], r["predicted_peak_bytes"]))
            check(r["peak_bytes"] == stage.get("peak_bytes"), "D=%d rank %d: peak %d == plan --dp's %r"
                  % (d, r["rank"], r["peak_bytes"], stage.get("peak_bytes")))
            check(r["static_bytes"] == stage.get("static", {}).get("total"),
                  "D=%d rank %d: static bytes %d == plan --dp's %r"
                  % (d, r["rank"], r["static_bytes"], stage.get("static", {}).get("total")))
            check(r["comm_bytes_per_step"] >= r["static_bytes"] // 4,
                  "D=%d rank %d: the gradients are communicated every step (%d bytes)" % (d, r["rank"], r["comm_bytes_per_step"]))
            rs = summary(os.path.join(out, r["dir"]))
            check(rs["loss"] == j["loss"], "D=%d rank %d reports the global losses" % (d, r["rank"]))
    # A directory of ranks reads as its rank 0 and is replaced with --force like a run directory.
    d2 = os.path.join(tmp, "d2")
    p = b.run("compare", d2)
    check("d2" in p.stdout, "compare reads a directory of ranks: %r" % p.stdout)
    b.run("run", *BASE, "--steps", 1, "--dp", 2, "--out", d2, expect=1)
    b.run("run", *BASE, "--steps", 1, "--dp", 2, "--out", d2, "--force")
    check(len(ranks_json(d2)["loss"]) == 1, "--force replaced the directory of ranks")
    # Two D = 2 runs with one seed: the same bits.
    runs = []
    for name in ("a", "b"):
        out, w = os.path.join(tmp, "same-" + name), os.path.join(tmp, "w-%s.safetensors" % name)
        b.run("run", *BASE, "--steps", steps, "--dp", 2, "--out", out, "--save-weights", w)
        with open(w, "rb") as f:
            runs.append((ranks_json(out)["loss"], f.read()))
    check(runs[0][0] == runs[1][0], "two D=2 runs: identical losses %r %r" % (runs[0][0], runs[1][0]))
    check(runs[0][1] == runs[1][1], "two D=2 runs: identical final weights")


def foreign_launcher(b, tmp, steps):
    """Ranks another launcher started (torchrun's RANK, WORLD_SIZE and LOCAL_RANK, with
    REMAT_DIST_STORE) join each other: each writes OUT/rank-N, rank 0 writes ranks.json over
    both, and the losses are `run --dp 2`'s bit for bit (the same computation). A local rank past
    the world is refused naming the variable, before any rendezvous."""
    store, out = os.path.join(tmp, "store"), os.path.join(tmp, "torchrun")
    os.mkdir(store)
    args = [b.binary, "run", *map(str, BASE), "--steps", str(steps), "--out", out]
    procs = [subprocess.Popen(args, env=dict(b.env, RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r),
                                             REMAT_DIST_STORE=store),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    for r, p in enumerate(procs):
        _, err = p.communicate(timeout=300)
        check(p.returncode == 0, "rank %d under another launcher exited %d: %s" % (r, p.returncode, err[-500:]))
    if not check(os.path.isfile(os.path.join(out, "ranks.json")), "rank 0 wrote ranks.json"):
        return
    j = ranks_json(out)
    check(j["complete"] and j["world_size"] == 2, "complete, 2 ranks: %r" % j.get("error"))
    ours = ranks_json(os.path.join(tmp, "same-a"))
    check(j["loss"] == ours["loss"], "the losses of run --dp 2: %r %r" % (j["loss"], ours["loss"]))
    for r in j["ranks"]:
        s = summary(os.path.join(out, r["dir"]))
        prov = s.get("provenance", {})
        check(prov.get("collectives") == "gloo", "rank %d: collectives %r" % (r["rank"], prov.get("collectives")))
        # Planning every stage and the rendezvous are parts of their own, not counted as "plugins".
        parts = s.get("startup_breakdown_ms", {})
        check(all(k in parts for k in ("stages", "rendezvous", "plugins", "plan")),
              "rank %d: start-up parts %r" % (r["rank"], sorted(parts)))
    env = dict(b.env, RANK="0", WORLD_SIZE="2", LOCAL_RANK="2", REMAT_DIST_STORE=store)
    p = subprocess.run(args[:-1] + [os.path.join(tmp, "bad-local")], env=env, capture_output=True, text=True,
                       timeout=60)
    check(p.returncode != 0 and "LOCAL_RANK" in p.stderr and "2" in p.stderr,
          "a local rank past the world is refused naming LOCAL_RANK: %d %r" % (p.returncode, p.stderr.strip()))


def summary_of_run(b, tmp, name, steps, extra):
    out = os.path.join(tmp, name)
    b.run("run", *BASE, "--steps", steps, "--out", out, *extra)
    return summary(out)


def refusals(b, tmp):
    out = os.path.join(tmp, "refused")
    b.refuses(["run", *BASE, "--dp", 3, "--out", out], "global batch", "dp")
    b.refuses(["run", *BASE, "--zero", 1, "--out", out], "zero", "--dp")
    check(not os.path.exists(out), "a refused run leaves no directory")


def failed_rank(b, tmp, sig):
    """Rank 1 killed (SIGKILL) or hung (SIGSTOP: its peer's collective times out) mid-run."""
    out = os.path.join(tmp, "failed-%d" % sig)
    timeout = 20 if sig == signal.SIGKILL else 3
    got = e2e_common.fail_rank(b, [*BASE, "--steps", 100000, "--dp", 2, "--dist-timeout", timeout, "--out", out],
                               1, sig)
    if got is None:
        return
    code, err, took = got
    check(took < timeout + 10, "the job ended within the timeout (%.1f s)" % took)
    check(code == 1, "exit code 1 after a rank failed, got %d" % code)
    if sig == signal.SIGKILL:
        check("rank 1 was killed by signal 9" in err, "the message names rank 1 and its signal: %r" % err.strip())
    else:
        check("rank 1 was stopped by signal" in err and "still running: 1" in err,
              "the message names rank 1, stopped, not rank 0 that gave up waiting for it: %r" % err.strip())
    if check(os.path.isfile(os.path.join(out, "ranks.json")), "the run directory has ranks.json"):
        j = ranks_json(out)
        check(j["complete"] is False and j["status"] == "error", "ranks.json says the run did not complete")
        check("rank 1" in j.get("error", "") or "running: 1" in j.get("error", ""),
              "ranks.json names rank 1: %r" % j.get("error"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--steps", default="2")
    a = ap.parse_args()
    b = e2e_common.Batch(a.bin)
    with tempfile.TemporaryDirectory() as tmp:
        refusals(b, tmp)
        numerics(b, tmp, a.steps)
        foreign_launcher(b, tmp, a.steps)
        failed_rank(b, tmp, signal.SIGKILL)
        failed_rank(b, tmp, signal.SIGSTOP)
    return e2e_common.exit_code("data-parallel runs ok")


if __name__ == "__main__":
    sys.exit(main())
