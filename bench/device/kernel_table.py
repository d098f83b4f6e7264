#!/usr/bin/env python3
"""Where a step's GPU time goes: the ops.csv of a run directory (the last counted step), summed
by kernel and by op, with the gaps between records on the compute stream.

Usage: kernel_table.py RUN_DIR [--top N]
       kernel_table.py --self-test    (checks the sums on testdata/kernels, an H200 trace)
Python standard library only.
"""
import argparse
import collections
import csv
import os
import sys


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["start_ns"], r["end_ns"] = int(r["start_ns"]), int(r["end_ns"])
    return rows


def summarize(rows):
    """Totals of the records of the compute stream and of every stream, by kernel and by op."""
    if not rows:
        return None
    span = max(r["end_ns"] for r in rows) - min(r["start_ns"] for r in rows)
    compute = sorted((r for r in rows if r["stream"] == "compute"), key=lambda r: r["start_ns"])
    busy = sum(r["end_ns"] - r["start_ns"] for r in compute)
    gaps = [b["start_ns"] - a["end_ns"] for a, b in zip(compute, compute[1:])]
    by_kernel = collections.defaultdict(lambda: [0, 0])
    by_op = collections.defaultdict(lambda: [0, 0])
    for r in rows:
        d = r["end_ns"] - r["start_ns"]
        for table, key in ((by_kernel, (r["stream"], r["name"])), (by_op, (r["stream"], r["op"] or "-"))):
            table[key][0] += d
            table[key][1] += 1
    return {
        "span_ns": span, "busy_ns": busy, "records": len(rows),
        "gaps": len(gaps), "gap_ns": sum(g for g in gaps if g > 0),
        "kernels": sorted(by_kernel.items(), key=lambda kv: -kv[1][0]),
        "ops": sorted(by_op.items(), key=lambda kv: -kv[1][0]),
    }


def render(s, top):
    out = ["step span %.3f ms, compute stream busy %.3f ms, %d records, %d gaps on the compute "
           "stream summing to %.3f ms" % (s["span_ns"] / 1e6, s["busy_ns"] / 1e6, s["records"],
                                          s["gaps"], s["gap_ns"] / 1e6)]
    for title, items in (("kernel", s["kernels"]), ("op", s["ops"])):
        out.append("%-9s %-66s %6s %9s %9s %6s" % ("stream", "by " + title, "calls", "ms", "us/call", "share"))
        for (stream, name), (ns, n) in items[:top]:
            share = ns / s["busy_ns"] if stream == "compute" and s["busy_ns"] else 0.0
            out.append("%-9s %-66.66s %6d %9.3f %9.1f %5.1f%%" % (stream, name, n, ns / 1e6, ns / n / 1e3, 100 * share))
    return "\n".join(out)


def self_test():
    here = os.path.dirname(os.path.abspath(__file__))
    s = summarize(load(os.path.join(here, "testdata", "kernels", "ops.csv")))
    bad = []
    # gpt2-124m B8 T1024 flash uniform:segments=3 on an H200 (the first CUDA run).
    xent = [v for (st, k), v in s["kernels"] if "xent_kernel" in k]
    if not xent or xent[0][1] != 26 or abs(xent[0][0] / 1e6 - 6.685) > 0.001:
        bad.append("cross-entropy: %r" % xent)
    if "xent_kernel" not in s["kernels"][0][0][1]:
        bad.append("the largest kernel should be the cross-entropy: %r" % (s["kernels"][0],))
    if abs(s["busy_ns"] / 1e6 - 31.732) > 0.001 or abs(s["span_ns"] / 1e6 - 33.033) > 0.001:
        bad.append("busy %.3f / span %.3f ms" % (s["busy_ns"] / 1e6, s["span_ns"] / 1e6))
    if s["gaps"] != 801 or abs(s["gap_ns"] / 1e6 - 1.19) > 0.01:
        bad.append("gaps: %d, %.3f ms" % (s["gaps"], s["gap_ns"] / 1e6))
    ops = dict(((st, k), v) for (st, k), v in s["ops"])
    if ops.get(("compute", "head_loss"), [0])[0] <= ops.get(("compute", "attn.flash"), [0])[0]:
        bad.append("head_loss should take longer than attn.flash in this trace")
    text = render(s, 5)
    if len(text.splitlines()) != 1 + 2 * 6:
        bad.append("render: %d lines" % len(text.splitlines()))
    if summarize([]) is not None:
        bad.append("an empty table should give None")
    for b in bad:
        print("FAIL", b)
    print("kernel_table self-test: %s" % ("FAILED" if bad else "ok"))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", nargs="?")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.run_dir:
        ap.error("a run directory is needed")
    path = os.path.join(a.run_dir, "ops.csv")
    try:
        s = summarize(load(path))
    except (OSError, KeyError, ValueError) as e:
        print("kernel_table: %s: %s" % (path, e), file=sys.stderr)
        return 1
    if s is None:
        print("kernel_table: %s has no records" % path, file=sys.stderr)
        return 1
    print(render(s, a.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
