#!/usr/bin/env python3
"""End to end: `export --format chrome` of a run of several ranks.

A pipeline run of two stages exported as one trace: one process per rank named with its stage,
each rank's ops, flows pairing each send with its receive on the other rank, the optimizer
phase. A rank missing is said and left out; a rank of another job refuses the export; the CSV
tables of such a directory are refused (each rank-N/ is exported on its own).
Python standard library only.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import e2e_common
from e2e_common import check, csv_rows as rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    b = e2e_common.Batch(a.bin)
    base = ["--model", "tiny", "--dtype", "fp32", "--steps", "1", "--warmup", "0", "--threads", "1"]
    with tempfile.TemporaryDirectory() as tmp:
        pp = os.path.join(tmp, "pp2")
        # A pipeline of two stages exported as one trace, a process per rank.
        b.run("run", *base, "--pp", "2", "--out", pp)
        trace = os.path.join(tmp, "pp.json")
        b.run("export", pp, "--format", "chrome", "--out", trace)
        with open(trace) as f:
            t = json.load(f)
        ev = t["traceEvents"]
        names = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "process_name"}
        check(sorted(names) == [1, 2], "one process per rank: %r" % names)
        check(any("stage 1" in n for n in names.values()), "ranks named with their stage: %r" % names)
        for k in (0, 1):
            n = len(rows(os.path.join(pp, "rank-%d" % k, "ops.csv")))
            xs = [e for e in ev if e.get("ph") == "X" and e["pid"] == k + 1 and "op_id" in e.get("args", {})]
            check(len(xs) == n, "rank %d: %d ops in the trace, %d in ops.csv" % (k, len(xs), n))
        starts = [e for e in ev if e.get("ph") == "s"]
        ends = {e["id"]: e for e in ev if e.get("ph") == "f"}
        sends = [r for r in rows(os.path.join(pp, "rank-0", "ops.csv")) if r["op"] == "send"]
        check(len(starts) > 0 and len(starts) == len(ends), "flows start and end: %d, %d" % (len(starts), len(ends)))
        check(len([s for s in starts if s["pid"] == 1 and s["name"] == "send"]) == len(sends),
              "a flow from each send of stage 0 (%d)" % len(sends))
        check(all(ends[s["id"]]["pid"] != s["pid"] for s in starts if s["id"] in ends), "each flow ends on the other rank")
        check(any(e.get("cat") == "phase" and e["name"] == "optimizer" for e in ev), "the optimizer phase is in the trace")

        # A rank missing: said, and the others exported.
        gone = os.path.join(tmp, "pp-gone")
        shutil.copytree(pp, gone)
        shutil.rmtree(os.path.join(gone, "rank-1"))
        p = b.run("export", gone, "--format", "chrome", "--out", os.path.join(tmp, "gone.json"))
        check("rank 1 of 2 is missing" in p.stderr, "a missing rank is said: %r" % p.stderr)
        # A rank of another job: refused with what differs.
        mixed = os.path.join(tmp, "pp-mixed")
        shutil.copytree(pp, mixed)
        other_job = os.path.join(tmp, "pp-other")
        b.run("run", *base, "--pp", "2", "--out", other_job)
        shutil.rmtree(os.path.join(mixed, "rank-1"))
        shutil.copytree(os.path.join(other_job, "rank-1"), os.path.join(mixed, "rank-1"))
        b.refuses(["export", mixed, "--format", "chrome", "--out", os.path.join(tmp, "mixed.json")],
                  "rank-1/ is not rank 1 of this run")
        b.refuses(["export", pp, "--format", "csv"], "several ranks")
        # The trace written into the ranks directory keeps it ours: --force replaces it whole.
        check(os.path.exists(os.path.join(pp, "trace.json")) is False, "exported to --out, not into the directory")
        b.run("export", pp, "--format", "chrome")
        check(os.path.exists(os.path.join(pp, "trace.json")), "export without --out writes DIR/trace.json")
        b.run("run", *base, "--pp", "2", "--out", pp, "--force")
        check(not os.path.exists(os.path.join(pp, "trace.json")), "run --force replaced the ranks directory whole")
    return e2e_common.exit_code("ranks export e2e: ok")


if __name__ == "__main__":
    sys.exit(main())
