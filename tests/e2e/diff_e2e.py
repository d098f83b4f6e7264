#!/usr/bin/env python3
"""End to end: `diff` of two runs op by op.

Runs tiny under `none` and `uniform` and checks `diff A B --out FILE.csv` as a user would: one
row per matched or unmatched op with its phase, the ops uniform added all in the recompute phase
(their count that of uniform's recompute ops in its ops.csv), every op of `none` matched by name,
block and phase, the printed sums per phase; diffs of another model or of a pipeline stage against one
process refused with what differs; --out never into a run directory nor over another file.
Python standard library only.
"""
import argparse
import os
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
        none, uni, small, pp = (os.path.join(tmp, n) for n in ("none", "uniform", "small", "pp2"))
        b.run("run", *base, "--out", none)
        b.run("run", *base, "--policy", "uniform", "--out", uni)

        out = os.path.join(tmp, "diff.csv")
        text = b.run("diff", none, uni, "--out", out).stdout
        d = rows(out)
        ops_none, ops_uni = rows(os.path.join(none, "ops.csv")), rows(os.path.join(uni, "ops.csv"))
        added = [r for r in d if r["status"] == "added"]
        matched = [r for r in d if r["status"] == "matched"]
        recompute = [r for r in ops_uni if r["phase"] == "recompute"]
        check(len(recompute) > 0, "uniform recomputes")
        check(len(added) == len(recompute), "diff: %d ops added, uniform has %d recompute ops" % (len(added), len(recompute)))
        check(all(r["phase"] == "recompute" and r["a_us"] == "" and r["b_us"] != "" for r in added),
              "every added op is a recompute op with no time in A")
        check(len(matched) == len(ops_none), "every op of none matched (%d of %d)" % (len(matched), len(ops_none)))
        check(not any(r["status"] == "removed" for r in d), "nothing removed")
        check(all(r["phase"] in ("forward", "recompute", "backward", "optimizer") for r in d), "each row has its phase")
        check("recompute" in text and "added" in text and "step:" in text, "the sums per phase are printed: %r" % text)
        j = b.json("diff", none, uni, "--json")
        if j:
            check(j["added"] == len(added) and j["phases"]["recompute"]["added"] == len(added), "--json agrees: %r" % j)

        b.run("run", "--model", "small", "--steps", "1", "--warmup", "0", "--threads", "1", "--out", small)
        b.refuses(["diff", none, small], "not alike", "model", "hidden")
        b.refuses(["diff", none, uni, "--out", os.path.join(uni, "x.csv")], "run directory")
        b.refuses(["diff", none, uni, "--out", out], "exists", "--force")
        b.run("diff", none, uni, "--out", out, "--force")
        other = os.path.join(tmp, "notes.csv")
        with open(other, "w") as f:
            f.write("mine\n")
        b.refuses(["diff", none, uni, "--out", other, "--force"], "not a diff")

        # A pipeline stage against one process: another layout.
        b.run("run", *base, "--pp", "2", "--out", pp)
        b.refuses(["diff", none, pp], "layout")
    return e2e_common.exit_code("diff e2e: ok")


if __name__ == "__main__":
    sys.exit(main())
