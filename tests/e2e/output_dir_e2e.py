#!/usr/bin/env python3
"""End-to-end test of what rematlab-batch deletes or replaces (docs/batch.md, docs/trace-format.md).

Against a binary (--bin). Python standard library only. It checks, by the messages and exit codes
a user sees:
  * --force replaces only RematLab's own run and sweep directories: a directory with a
    summary.json that is not ours (`{}`), or ours next to a user's file, is refused and the
    message names the file; nothing in it changes;
  * an empty --out is refused when the command line is parsed (exit 2), and nothing is written;
  * export --out refuses an existing path without --force, with --force replaces only an earlier
    export, and never writes into another run directory;
  * compare notes each leftover of an interrupted write next to the directory it reads; `clean`
    lists (--dry-run) and deletes only leftovers that are ours and whose process has ended;
  * a failed --save-weights leaves no partial file.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import e2e_common
from e2e_common import check

RUN = ["--model", "tiny", "--steps", "1", "--warmup", "0"]


class Batch(e2e_common.Batch):
    def refuses(self, args, *words, expect="fail"):
        """The command fails (with `expect`), and its message names every word."""
        p = self.run(*args, expect=expect)
        for w in words:
            check(w in p.stderr, "`%s`: the message should name %r: %r" % (" ".join(map(str, args)), w, p.stderr.strip()))
        check("terminate called" not in p.stderr, "`%s` crashed: %r" % (" ".join(map(str, args)), p.stderr[-500:]))
        return p


def digest(path):
    """Every file under `path` with its bytes."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, path)] = fh.read()
    return out


def write(path, text):
    with open(path, "w") as fh:
        fh.write(text)


def read(path):
    """The file's text, None when it is gone."""
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def dead_pid():
    """A process id that no process has now."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def leftovers(d):
    return sorted(f for f in os.listdir(d) if ".tmp-" in f or ".old-" in f)


def test_force(b, w):
    os.makedirs(w("proj"))
    write(w("proj", "summary.json"), "{}\n")
    write(w("proj", "thesis.tex"), "work")
    b.refuses(["run", *RUN, "--out", w("proj"), "--force"], "thesis.tex", "even with --force")
    check(read(w("proj", "thesis.tex")) == "work", "--force left the user's thesis.tex alone")
    check(sorted(os.listdir(w("proj"))) == ["summary.json", "thesis.tex"], "--force changed nothing in proj")

    os.makedirs(w("empty-summary"))
    write(w("empty-summary", "summary.json"), "{}")
    b.refuses(["run", *RUN, "--out", w("empty-summary"), "--force"], "summary.json", "rematlab-run")
    check(read(w("empty-summary", "summary.json")) == "{}", "a {} summary.json is not replaced")

    os.makedirs(w("not-a-sweep"))
    write(w("not-a-sweep", "sweep.json"), "{}")
    write(w("not-a-sweep", "comparison.csv"), "mine\n")
    b.refuses(["sweep", *RUN, "--policies", "none", "--out", w("not-a-sweep"), "--force"], "sweep.json", "rematlab-sweep")
    check(read(w("not-a-sweep", "comparison.csv")) == "mine\n", "a sweep.json not ours is not replaced")

    # Our own run with a user's file in it is not replaced either; without the file it is.
    b.run("run", *RUN, "--out", w("r1"))
    write(w("r1", "notes.txt"), "mine")
    b.refuses(["run", *RUN, "--out", w("r1"), "--force"], "notes.txt")
    check(read(w("r1", "notes.txt")) == "mine", "a run with a user's file in it is not replaced")
    if os.path.exists(w("r1", "notes.txt")):
        os.remove(w("r1", "notes.txt"))
    b.run("run", *RUN, "--out", w("r1"), "--force")
    check(os.path.isfile(w("r1", "summary.json")), "--force replaces our run")
    b.run("sweep", *RUN, "--policies", "none", "--out", w("S"))
    b.run("sweep", *RUN, "--policies", "none", "--out", w("S"), "--force")
    check(os.path.isfile(w("S", "sweep.json")) and os.path.isdir(w("S", "none")), "--force replaces our sweep")
    check(not leftovers(w()), "replacing left %r" % leftovers(w()))


def test_empty_out(b, w):
    cwd = w("cwd")
    os.makedirs(cwd)
    for args in (["run", *RUN, "--out", ""], ["sweep", *RUN, "--policies", "none", "--out", ""],
                 ["export", w("r1"), "--format", "csv", "--out", ""], ["run", *RUN, "--save-weights", ""]):
        p = b.run(*args, expect=2, cwd=cwd)
        check("empty" in p.stderr, "`%s`: the message says the path is empty: %r" % (" ".join(args), p.stderr))
    check(os.listdir(cwd) == [], "an empty --out wrote %r" % os.listdir(cwd))
    shutil.rmtree(cwd)


def test_export(b, w):
    b.run("export", w("r1"), "--format", "csv", "--out", w("tables"))
    b.refuses(["export", w("r1"), "--format", "csv", "--out", w("tables")], "tables", "--force")
    b.run("export", w("r1"), "--format", "csv", "--out", w("tables"), "--force")
    write(w("tables", "thesis.tex"), "work")
    b.refuses(["export", w("r1"), "--format", "csv", "--out", w("tables"), "--force"], "thesis.tex")
    check(read(w("tables", "thesis.tex")) == "work", "export --force left the user's file alone")

    # Another run's tables would no longer match its summary: never written into, even with --force.
    b.run("run", *RUN, "--policy", "none", "--out", w("r2"))
    before = digest(w("r2"))
    b.refuses(["export", w("r1"), "--format", "csv", "--out", w("r2")], "r2")
    b.refuses(["export", w("r1"), "--format", "csv", "--out", w("r2"), "--force"], "r2")
    b.refuses(["export", w("r1"), "--format", "chrome", "--out", w("r2", "trace.json"), "--force"], "r2")
    b.refuses(["export", w("r1"), "--format", "chrome", "--out", w("r2", "summary.json"), "--force"], "r2")
    b.refuses(["export", w("r1"), "--format", "chrome", "--out", w("r1", "extra.json")], "r1")
    check(digest(w("r2")) == before, "export wrote into another run directory")

    write(w("notes.json"), "mine")
    b.refuses(["export", w("r1"), "--format", "chrome", "--out", w("notes.json")], "notes.json", "--force")
    b.refuses(["export", w("r1"), "--format", "chrome", "--out", w("notes.json"), "--force"], "not a Chrome trace")
    check(read(w("notes.json")) == "mine", "export --force left a file that is not a trace alone")
    b.run("export", w("r1"), "--format", "chrome", "--out", w("t.json"))
    b.refuses(["export", w("r1"), "--format", "chrome", "--out", w("t.json")], "--force")
    b.run("export", w("r1"), "--format", "chrome", "--out", w("t.json"), "--force")
    b.run("export", w("r1"), "--format", "chrome")  # into the run itself, as always


def test_leftovers(b, w):
    gone = dead_pid()
    tmp, old = w(".r1.tmp-%d-1" % gone), w(".r1.old-%d-2" % gone)
    live = w(".r1.tmp-%d-3" % os.getpid())
    user = w(".r1.tmp-%d-4" % gone)
    shutil.copytree(w("r1"), tmp)
    shutil.copytree(w("r1"), old)
    shutil.copytree(w("r1"), live)
    os.makedirs(user)
    write(os.path.join(user, "thesis.tex"), "work")

    p = b.run("compare", w("r1"))
    for l in (tmp, old, live, user):
        check(l in p.stderr, "compare names the leftover %s: %r" % (l, p.stderr))
    check("peak memory" in p.stdout, "compare still prints the table")

    p = b.run("clean", w(), "--dry-run", expect=1)
    check("would remove " + tmp in p.stdout and "would remove " + old in p.stdout, "clean --dry-run lists ours: %r" % p.stdout)
    check("kept " + live in p.stdout and "still running" in p.stdout, "clean keeps a running process's: %r" % p.stdout)
    check("kept " + user in p.stdout and "thesis.tex" in p.stdout, "clean keeps what is not ours: %r" % p.stdout)
    check(all(os.path.exists(x) for x in (tmp, old, live, user)), "clean --dry-run removed something")
    for x in (tmp, old, live, user):  # as the dry run found them, whatever it did
        if not os.path.exists(x):
            shutil.copytree(w("r1"), x)

    p = b.run("clean", w(), expect=1)
    check(not os.path.exists(tmp) and not os.path.exists(old), "clean removed the leftovers that are ours")
    check(os.path.isdir(live) and read(os.path.join(user, "thesis.tex")) == "work",
          "clean left the running process's and the user's alone")
    shutil.rmtree(user)
    j = b.json("clean", w(), "--json")
    if j is not None:
        check(j["removed"] == [] and [k["path"] for k in j["kept"]] == [live], "clean --json: %r" % j)
    shutil.rmtree(live)
    p = b.run("clean", w())
    check("no leftovers" in p.stdout, "clean says when there is nothing: %r" % p.stdout)
    b.refuses(["clean", w("does-not-exist")], "does-not-exist")


def test_save_weights(b, w):
    os.makedirs(w("weights-dir"))
    b.refuses(["run", *RUN, "--save-weights", w("weights-dir")], "weights-dir")
    left = [f for f in os.listdir(w()) if f.startswith("weights-dir")]
    check(left == ["weights-dir"], "a failed --save-weights left %r" % left)
    check(os.listdir(w("weights-dir")) == [], "a failed --save-weights wrote into the directory")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="rematlab-outdir-e2e-")
    try:
        b = Batch(os.path.abspath(a.bin))
        w = lambda *p: os.path.join(work, *p)
        test_force(b, w)
        test_empty_out(b, w)
        test_export(b, w)
        test_leftovers(b, w)
        test_save_weights(b, w)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return e2e_common.exit_code()


if __name__ == "__main__":
    sys.exit(main())
