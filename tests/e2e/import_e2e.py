#!/usr/bin/env python3
"""rematlab-batch import: torch memory snapshots (both layouts) and a torch.profiler trace
become run directories that compare and export read; bad input gets a clear message, a non-zero
exit and no crash, and a pickle that would run code is refused without running it.
Python standard library only."""
import argparse
import csv
import json
import os
import pickle
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_common  # noqa: E402
from e2e_common import check  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "torch")
MARKER = "/tmp/rematlab-pickle-must-not-run"


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def refused(b, args, words):
    p = b.run(*args, expect="fail")
    check(p.returncode in (1, 2), "`%s` exits 1 or 2, not %d (a crash?)" % (" ".join(map(str, args)), p.returncode))
    for w in words:
        check(w in p.stderr, "`%s` says %r: %s" % (" ".join(map(str, args)), w, p.stderr.strip()))
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    b = e2e_common.Batch(args.bin)
    with tempfile.TemporaryDirectory() as tmp:
        # The fixtures, written afresh by the script (they must equal the committed ones).
        fresh = os.path.join(tmp, "fixtures")
        subprocess.run([sys.executable, os.path.join(DATA, "make_fixtures.py"), fresh], check=True)
        for name in sorted(os.listdir(fresh)):
            with open(os.path.join(fresh, name), "rb") as f, open(os.path.join(DATA, name), "rb") as g:
                check(f.read() == g.read(), "tests/data/torch/%s is what make_fixtures.py writes" % name)

        dirs = []
        for name in ("snapshot-torch2", "snapshot-torch113"):
            out = os.path.join(tmp, name)
            p = b.run("import", os.path.join(DATA, name + ".pickle"), "--out", out, "--json")
            if p.returncode:
                continue
            dirs.append(out)
            with open(os.path.join(DATA, name + ".expected.json")) as f:
                want = json.load(f)
            got = json.loads(p.stdout)
            check(got["memory_events"] == want["memory_events"], "%s: %d events" % (name, want["memory_events"]))
            check(got["peak_bytes"] == want["peak_bytes"], "%s: peak %d" % (name, want["peak_bytes"]))
            with open(os.path.join(out, "summary.json")) as f:
                s = json.load(f)
            check(s["source"] == "pytorch-snapshot", "%s: source pytorch-snapshot" % name)
            ev = rows(os.path.join(out, "memory_events.csv"))
            check(len(ev) == want["memory_events"], "%s: memory_events.csv rows" % name)
            check(sum(int(r["delta_bytes"]) for r in ev if int(r["delta_bytes"]) > 0) == want["allocated_bytes"],
                  "%s: allocated bytes" % name)
            check(all(r["category"] == "unknown" for r in ev), "%s: category unknown" % name)
            check(any(r["tensor"] == want["a_name"] for r in ev), "%s: frames in the names" % name)
            tl = rows(os.path.join(out, "memory_timeline.csv"))
            check(max(int(r["unknown"]) for r in tl) == want["peak_bytes"], "%s: timeline peak in 'unknown'" % name)
        # The profiler trace.
        prof = os.path.join(tmp, "profile")
        p = b.run("import", os.path.join(DATA, "profiler-trace.json"), "--out", prof)
        if p.returncode == 0:
            dirs.append(prof)
            ops = rows(os.path.join(prof, "ops.csv"))
            check(len(ops) == 11, "profiler trace: 11 ops, got %d" % len(ops))
            check({r["phase"] for r in ops} == {"forward", "backward", "optimizer"}, "profiler trace: its phases")
        # Real traces of Debian's torch 1.13 (record_profiler_traces.py): the legacy bare array.
        for name in ("torch-1.13.0-profiler", "torch-1.13.0-autograd-profiler"):
            with open(os.path.join(DATA, name + ".json")) as f:
                raw = json.load(f)
            out = os.path.join(tmp, name)
            p = b.run("import", os.path.join(DATA, name + ".json"), "--out", out, "--json")
            if p.returncode:
                continue
            dirs.append(out)
            got = json.loads(p.stdout)
            ops = rows(os.path.join(out, "ops.csv"))
            check(got["ops"] == len(ops) == sum(1 for e in raw if e.get("ph") == "X"),
                  "%s: every complete event an op (%d)" % (name, len(ops)))
            check(got["memory_events"] == 0, "%s: the legacy layout has no memory events" % name)
            check({r["phase"] for r in ops} == {"forward", "backward", "optimizer"}, "%s: its phases" % name)
            check(all(r["stream"] == "host" and r["op"] == "cpu_op" for r in ops), "%s: host cpu_ops" % name)
            with open(os.path.join(out, "summary.json")) as f:
                s = json.load(f)
            check(s["device"] == "cpu" and s["provenance"]["profiler_layout"].startswith("legacy"),
                  "%s: a CPU trace of the legacy layout" % name)
        # compare and export read them like any run.
        if dirs:
            p = b.run("compare", *dirs, "--json")
            if p.returncode == 0:
                check(len(json.loads(p.stdout)["runs"]) == len(dirs),
                      "compare lists every imported run")
            trace = os.path.join(tmp, "again.json")
            b.run("export", dirs[0], "--format", "chrome", "--out", trace)
            if os.path.exists(trace):
                with open(trace) as f:
                    events = json.load(f)["traceEvents"]
                check(any(e.get("name") == "mem unknown" for e in events), "export: the 'mem unknown' counter")
            csvdir = os.path.join(tmp, "csv")
            b.run("export", dirs[0], "--format", "csv", "--out", csvdir)
            check(os.path.exists(os.path.join(csvdir, "memory_events.csv")), "export --format csv")
        # An existing directory is not replaced without --force; with it, it is.
        if dirs:
            refused(b, ["import", os.path.join(DATA, "snapshot-torch2.pickle"), "--out", dirs[0]], ["exists"])
            b.run("import", os.path.join(DATA, "snapshot-torch2.pickle"), "--out", dirs[0], "--force")

        # Refused, each with its message.
        if os.path.exists(MARKER):
            os.remove(MARKER)
        refused(b, ["import", os.path.join(DATA, "runs-code-global.pickle"), "--out", os.path.join(tmp, "x")],
                ["opcode GLOBAL", "would import or call code", "offset"])
        refused(b, ["import", os.path.join(DATA, "runs-code-stack-global.pickle"), "--out", os.path.join(tmp, "x")],
                ["opcode STACK_GLOBAL"])
        check(not os.path.exists(MARKER), "a pickle that would run code ran nothing")
        check(not os.path.exists(os.path.join(tmp, "x")), "a refused import writes no directory")
        refused(b, ["import", os.path.join(DATA, "unknown-layout.pickle"), "--out", os.path.join(tmp, "x")],
                ["action 'teleport'", "newer snapshot layout"])
        refused(b, ["import", os.path.join(DATA, "not-a-snapshot.pickle"), "--out", os.path.join(tmp, "x")],
                ["not a torch.cuda memory snapshot"])
        refused(b, ["import", os.path.join(DATA, "not-a-profiler-trace.json"), "--out", os.path.join(tmp, "x")],
                ["not a torch.profiler trace"])
        with open(os.path.join(DATA, "snapshot-torch2.pickle"), "rb") as f:
            whole = f.read()
        for cut in (1, 2, len(whole) // 3, len(whole) - 1):
            path = os.path.join(tmp, "cut.pickle")
            with open(path, "wb") as f:
                f.write(whole[:cut])
            refused(b, ["import", path, "--out", os.path.join(tmp, "x")], ["pickle offset"])
        # The opcode before the first 'action' string replaced by a byte that is no opcode.
        at = whole.find(b"\x8c\x06action")
        check(at > 0, "the fixture has the string 'action'")
        corrupt = bytearray(whole)
        corrupt[at] = 0xFF
        path = os.path.join(tmp, "corrupt.pickle")
        with open(path, "wb") as f:
            f.write(bytes(corrupt))
        refused(b, ["import", path, "--out", os.path.join(tmp, "x")], ["pickle offset %d: unknown opcode 0xff" % at])
        path = os.path.join(tmp, "trailing.pickle")
        with open(path, "wb") as f:
            f.write(pickle.dumps({"segments": []}, protocol=4) + b"extra")
        refused(b, ["import", path, "--out", os.path.join(tmp, "x")], ["bytes after STOP"])
        refused(b, ["import", os.path.join(tmp, "missing.pickle"), "--out", os.path.join(tmp, "x")], ["missing"])
        # An imported run directory of a newer format version is refused by compare.
        if dirs:
            s_path = os.path.join(dirs[0], "summary.json")
            with open(s_path) as f:
                s = json.load(f)
            s["format_version"] = 99
            with open(s_path, "w") as f:
                json.dump(s, f)
            refused(b, ["compare", dirs[0]], ["format version 99 is newer"])
    return e2e_common.exit_code("import e2e ok")


if __name__ == "__main__":
    sys.exit(main())
