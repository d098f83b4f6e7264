#!/usr/bin/env python3
"""End to end: collectives on their own stream, and compare across layouts.

Runs tiny (fp32) as one process, with --tp 2 --sp and with --dp 2, then checks as a user would:
every collective of a rank is on the `comm` stream of ops.csv with its group's global ranks
(the tensor-parallel group `0 1` for the blocks' exchanges, the data-parallel group for the
gradients' all-reduce), trace.json has a `comm` thread holding exactly those ops, and
`compare` takes a run of several ranks as its peak rank (or --rank N), labelled with its layout,
against the single process's `none` run of the same global model (its peak reduction is the
measured one; its gradients are not compared), and refuses a rank the run does not have.
Python standard library only.
"""
import argparse
import csv
import json
import os
import sys
import tempfile

import e2e_common
from e2e_common import check


def ops(d):
    with open(os.path.join(d, "ops.csv")) as f:
        return list(csv.DictReader(f))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    b = e2e_common.Batch(a.bin)
    base = ["--model", "tiny", "--dtype", "fp32", "--steps", "2", "--warmup", "0", "--threads", "1"]
    with tempfile.TemporaryDirectory() as tmp:
        one, tp, dp = (os.path.join(tmp, n) for n in ("one", "tp2sp", "dp2"))
        b.run("run", *base, "--out", one)
        b.run("run", *base, "--tp", "2", "--sp", "--out", tp)
        b.run("run", *base, "--dp", "2", "--out", dp)

        kinds = ("all_gather", "reduce_scatter", "all_reduce", "broadcast", "barrier")
        for run, groups in ((tp, {0: "0 1", 1: "0 1"}), (dp, {0: "0 1", 1: "0 1"})):
            for rank, group in groups.items():
                d = os.path.join(run, "rank-%d" % rank)
                rows = ops(d)
                comm = [r for r in rows if r["stream"] == "comm"]
                check(len(comm) > 0, "%s: collectives on the comm stream" % d)
                for r in rows:
                    check((r["stream"] == "comm") == (r["op"] in kinds), "%s: %s on stream %s" % (d, r["name"], r["stream"]))
                    check(r["ranks"] == (group if r["stream"] == "comm" else ""),
                          "%s: %s has ranks %r" % (d, r["name"], r["ranks"]))
                    if r["stream"] == "comm":
                        check(int(r["bytes"]) > 0 and int(r["end_ns"]) > int(r["start_ns"]),
                              "%s: %s has bytes and a time" % (d, r["name"]))
                with open(os.path.join(d, "trace.json")) as f:
                    tr = json.load(f)
                tids = [e for e in tr["traceEvents"] if e.get("ph") == "M" and e["name"] == "thread_name"
                        and e["args"]["name"] == "comm"]
                check(len(tids) == 1, "%s: trace.json has a comm thread" % d)
                if tids:
                    on = [e for e in tr["traceEvents"] if e.get("ph") == "X" and e["tid"] == tids[0]["tid"]]
                    check(len(on) == len(comm), "%s: the comm thread holds the %d collectives (%d)" % (d, len(comm), len(on)))
                    check(all(e["args"].get("ranks") == group for e in on), "%s: each with its ranks" % d)
        names = [r["name"] for r in ops(os.path.join(dp, "rank-1")) if r["stream"] == "comm"]
        check(names == ["grads.all_reduce"], "dp 2: the gradients' all-reduce is its one collective: %r" % names)

        c = b.json("compare", one, tp, dp, "--json")
        if c:
            runs = {r["run"]: r for r in c["runs"]}
            with open(os.path.join(tp, "ranks.json")) as f:
                rj = json.load(f)
            peak = max(rj["ranks"], key=lambda r: (r["peak_bytes"], -r["rank"]))
            label = "tp2sp (tp 2 sp, rank %d)" % peak["rank"]
            check(label in runs, "compare labels the tp run %r: %r" % (label, list(runs)))
            check("dp2 (dp 2, rank 0)" in runs or "dp2 (dp 2, rank 1)" in runs, "compare labels the dp run: %r" % list(runs))
            if label in runs:
                r, base_run = runs[label], runs["one"]
                check(r["layout"] == "tp 2 sp" and r["rank"] == peak["rank"], "layout and rank in the JSON: %r" % r)
                check(r["peak_bytes"] == peak["peak_bytes"], "the tp run enters with its peak rank's peak")
                want = 100.0 * (1 - r["peak_bytes"] / base_run["peak_bytes"])
                check(r["peak_reduction_pct"] is not None and abs(r["peak_reduction_pct"] - want) < 1e-9,
                      "reduction against the single process: %r, want %r" % (r["peak_reduction_pct"], want))
                check(r["grads_match_none"] is None, "a rank's gradients are not compared with one process's")
                check(base_run["grads_match_none"] is True and base_run["layout"] == "1 rank", "the baseline itself")
        c1 = b.json("compare", one, tp, "--rank", "1", "--json")
        if c1:
            check(any(r["run"] == "tp2sp (tp 2 sp, rank 1)" for r in c1["runs"]), "--rank 1 takes rank 1: %r"
                  % [r["run"] for r in c1["runs"]])
        b.refuses(["compare", tp, "--rank", "2"], "--rank 2", "a run of 2 ranks (0 to 1)")
        text = b.run("compare", one, tp).stdout
        check("(tp 2 sp, rank" in text, "the table labels the layout: %r" % text)
    return e2e_common.exit_code("comm e2e: ok")


if __name__ == "__main__":
    sys.exit(main())
