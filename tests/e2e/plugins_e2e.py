#!/usr/bin/env python3
"""End-to-end test of rematlab-batch with hostile policy plugins (tests/plugins) on
REMAT_PLUGIN_PATH, run as a user would run it.

`list policies` exits 0, lists the usable policies and names each skipped file on stderr (a
description that throws, names that cannot be chosen, a static initializer that crashes); a FIFO
named x.so is skipped without blocking; `plan` with a plugin whose plan crashes, hangs (with
REMAT_PLAN_TIMEOUT_S=1) or writes garbage fails with one message naming the file and what
happened, prints nothing on stdout, and the other policies keep planning. Python standard library
only.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import e2e_common
from e2e_common import check, failures

SKIPPED = {
    "description_throws.so": "no words for it",
    "bad_name.so": "'a:b'",
    "bad_param_name.so": "'k=v'",
    "static_init_crash.so": "SIGSEGV",
}


class Batch(e2e_common.Batch):
    def __init__(self, binary, plugin_path):
        super().__init__(binary)
        self.env["REMAT_PLUGIN_PATH"] = plugin_path
        self.env.pop("REMAT_PLAN_TIMEOUT_S", None)

    def plan_fails(self, policy, *words):
        """`plan --json` with `policy` exits 1, prints nothing on stdout and names every word."""
        p = self.run("plan", "--model", "tiny", "--policy", policy, "--json", expect=1)
        check(p.stdout == "", "plan %s: nothing on stdout expected: %r" % (policy, p.stdout[:300]))
        for w in words:
            check(w in p.stderr, "plan %s: the message should name %r: %r" % (policy, w, p.stderr))
        check("terminate called" not in p.stderr, "plan %s crashed: %r" % (policy, p.stderr))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--plugins", required=True, help="the broken plugins (build/test-plugins)")
    a = ap.parse_args()
    b = Batch(a.bin, os.path.abspath(a.plugins))  # REMAT_PLUGIN_PATH takes absolute paths only

    p = b.run("list", "policies")
    for name in ("none", "uniform", "plan_crash"):
        check(any(l.startswith(name + "  ") for l in p.stdout.splitlines()), "list: %s not listed" % name)
    for f, why in SKIPPED.items():
        lines = [l for l in p.stderr.splitlines() if f in l]
        check(lines and "warning" in lines[0] and why in lines[0],
              "list: stderr should warn about %s (%s): %r" % (f, why, p.stderr))
        check(f not in p.stdout, "list: %s on stdout" % f)
    j = b.json("list", "policies", "--json")
    if j:
        rejected = {os.path.basename(r["file"]): r["reason"] for r in j["rejected"]}
        for f, why in SKIPPED.items():
            check(why in rejected.get(f, ""), "list --json: %s rejected for %r: %r" % (f, why, rejected.get(f)))
        check("description_throws" not in [x["name"] for x in j["policies"]], "list --json lists description_throws")

    b.plan_fails("plan_crash", "plan_crash.so", "SIGSEGV")
    b.plan_fails("plan_garbage", "plan_garbage.so", "not a plan reply")
    b.env["REMAT_PLAN_TIMEOUT_S"] = "1"
    b.plan_fails("plan_hangs", "plan_hangs.so", "did not finish within 1 s", "REMAT_PLAN_TIMEOUT_S")
    b.env["REMAT_PLAN_TIMEOUT_S"] = "soon"
    b.plan_fails("none", "REMAT_PLAN_TIMEOUT_S", "'soon'")
    del b.env["REMAT_PLAN_TIMEOUT_S"]
    j = b.json("plan", "--model", "tiny", "--policy", "uniform:segments=2", "--json")
    check(bool(j) and j.get("schedule", {}).get("policy") == "uniform", "plan uniform with broken plugins around: %r"
          % (j or {}).get("schedule", {}).get("policy"))

    # A FIFO, a directory and a device named like plugins: skipped, never opened.
    tmp = tempfile.mkdtemp(prefix="remat_plugins_e2e_")
    try:
        os.mkfifo(os.path.join(tmp, "x.so"))
        os.mkdir(os.path.join(tmp, "d.so"))
        os.symlink("/dev/null", os.path.join(tmp, "null.so"))
        b.env["REMAT_PLUGIN_PATH"] = tmp
        p = b.run("list", "policies")
        for f, kind in (("x.so", "FIFO"), ("d.so", "directory"), ("null.so", "device")):
            lines = [l for l in p.stderr.splitlines() if os.path.join(tmp, f) in l]
            check(lines and kind in lines[0] and "not a regular file" in lines[0],
                  "list: stderr should say %s is %s: %r" % (f, kind, p.stderr))
        check(any(l.startswith("none  ") for l in p.stdout.splitlines()), "list: none not listed beside the FIFO")
    finally:
        shutil.rmtree(tmp)

    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("hostile plugins: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
