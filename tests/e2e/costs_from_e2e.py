#!/usr/bin/env python3
"""End-to-end test of `--costs-from RUN_DIR` (plan, run, sweep), run as a user would run it.

A run of `none` on `tiny` (CPU) with --out gives measured step costs; `plan --policy budget`
with them succeeds, fits its budget and reports the measured unit; `run` and `sweep` record the
unit in their provenance; a different model, a directory that is not a run and --schedule with
--costs-from are refused with one line (exit 1, or 2 for the command line). Python standard
library only.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import e2e_common
from e2e_common import check

# The fields measured costs must agree on, in the order the check reports them.
FIELDS = ["architecture", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "batch",
          "attention", "dtype"]


class Batch(e2e_common.Batch):
    def json(self, *args):
        return super().json(*args) or {}

    def refuses(self, args, words, expect=1):
        """Fails with `expect` and one line on stderr naming every word."""
        p = self.run(*args, expect=expect)
        lines = p.stderr.strip().splitlines()
        shown = " ".join(map(str, args))
        # A command line CLI11 cannot parse (exit 2) gets its usual hint on a second line.
        check(len(lines) == (1 if expect == 1 else 2), "`%s`: one line expected on stderr: %r"
              % (shown, p.stderr))
        for w in words:
            check(w in p.stderr, "`%s`: the message should name %r: %r" % (shown, w, p.stderr.strip()))
        return p


def first_difference(a, b):
    for f in FIELDS:
        if a[f] != b[f]:
            return f, str(a[f]), str(b[f])
    return None


def test(b, work):
    measured = os.path.join(work, "none")
    b.run("run", "--model", "tiny", "--policy", "none", "--steps", "1", "--warmup", "0", "--out", measured)
    if not check(os.path.isfile(os.path.join(measured, "summary.json")), "run --out wrote no run directory"):
        return
    unit = "ns measured on cpu in " + measured

    # A feasible budget below storing everything: the selective policy's own activation peak.
    none = b.json("plan", "--model", "tiny", "--policy", "none", "--json")
    sel = b.json("plan", "--model", "tiny", "--policy", "selective", "--json")
    budget = sel.get("activation_peak_bytes", 0)
    check(0 < budget < none.get("activation_peak_bytes", 0), "selective saves activations on tiny")

    flops = b.json("plan", "--model", "tiny", "--policy", "budget", "--memory-budget", budget, "--json")
    check(flops.get("cost_unit") == "flops", "plan without --costs-from plans with flops: %r"
          % flops.get("cost_unit"))
    timed = b.json("plan", "--model", "tiny", "--policy", "budget", "--memory-budget", budget,
                   "--costs-from", measured, "--json")
    check(timed.get("cost_unit") == unit, "plan --json reports the measured unit: %r" % timed.get("cost_unit"))
    check(0 < timed.get("activation_peak_bytes", budget + 1) <= budget,
          "the plan with measured costs fits the budget: %r > %d" % (timed.get("activation_peak_bytes"), budget))
    human = b.run("plan", "--model", "tiny", "--policy", "budget", "--memory-budget", budget,
                  "--costs-from", measured)
    check("step costs            " + unit in human.stdout, "plan names the measured unit: %r" % human.stdout)

    # A run and a sweep planned with them say so in their provenance.
    out = os.path.join(work, "budget-run")
    b.run("run", "--model", "tiny", "--policy", "budget", "--memory-budget", budget, "--costs-from",
          measured, "--steps", "1", "--warmup", "0", "--out", out)
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    check(s.get("provenance", {}).get("planner_costs") == unit, "run records the unit in its provenance")
    check(s.get("activation_peak_bytes", budget + 1) <= budget, "the run fits its budget")
    sweep = os.path.join(work, "sweep")
    b.run("sweep", "--model", "tiny", "--policies", "none", "--memory-budgets", budget, "--costs-from",
          measured, "--steps", "1", "--warmup", "0", "--out", sweep)
    with open(os.path.join(sweep, "sweep.json")) as f:
        sj = json.load(f)
    check(sj.get("provenance", {}).get("planner_costs") == unit, "sweep.json records the unit")
    for r in sj.get("runs", []):
        with open(os.path.join(sweep, r["dir"], "summary.json")) as f:
            check(json.load(f).get("provenance", {}).get("planner_costs") == unit,
                  "sweep run %s records the unit" % r["dir"])

    # Another model: one line naming the directory and the first field that differs.
    small = b.json("plan", "--model", "small", "--policy", "none", "--json").get("model", {})
    diff = first_difference(none.get("model", {}), small)
    if check(diff is not None, "small and tiny differ"):
        field, in_run, in_plan = diff
        b.refuses(["plan", "--model", "small", "--policy", "budget", "--memory-budget", "1GiB",
                   "--costs-from", measured],
                  ["--costs-from " + measured, field + ": " + in_run + " in the run, " + in_plan + " in the plan"])
    b.refuses(["plan", "--model", "tiny", "--seq", "32", "--policy", "none", "--costs-from", measured],
              ["--costs-from " + measured, "seq: 64 in the run, 32 in the plan"])
    b.refuses(["sweep", "--model", "small", "--policies", "none", "--costs-from", measured,
               "--out", os.path.join(work, "never")], ["--costs-from " + measured, "layers"])
    check(not os.path.exists(os.path.join(work, "never")), "a refused sweep wrote nothing")

    # Not a run directory; a sweep directory; --schedule with --costs-from.
    empty = os.path.join(work, "empty")
    os.makedirs(empty)
    b.refuses(["plan", "--model", "tiny", "--policy", "none", "--costs-from", empty],
              ["--costs-from " + empty, "not a run directory"])
    b.refuses(["run", "--model", "tiny", "--policy", "none", "--costs-from", sweep],
              ["--costs-from " + sweep, "sweep directory"])
    plan_file = os.path.join(work, "plan.json")
    with open(plan_file, "w") as f:
        json.dump(none, f)
    b.refuses(["plan", "--model", "tiny", "--schedule", plan_file, "--costs-from", measured],
              ["--costs-from"], expect=2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="rematlab-costs-e2e-")
    try:
        test(Batch(os.path.abspath(a.bin)), work)
    finally:
        if a.keep:
            print("kept " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return e2e_common.exit_code()


if __name__ == "__main__":
    sys.exit(main())
