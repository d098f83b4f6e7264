"""One rule for what RematLab deletes or replaces, from the Python side: the cases of
tests/data/ownership/cases.json judged by python/rematlab/output_dir.py (the C++ writer judges
the same cases in tests/unit/ownership_cases_test.cpp), then, with torch, `rematlab.record`
itself: it refuses a user's directory that merely says "format": "rematlab-run", never waits on
a FIFO summary.json, never writes through a hard-linked marker, replaces an earlier recording
(which rematlab-batch replaces too), and records an infinite loss as a diverged run that
rematlab-batch reads. The rule part needs only the standard library; the rest is skipped
without torch."""
import argparse
import importlib.util
import json
import os
import shutil
import signal
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import Batch, check, exit_code  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--bin", required=True)
ap.add_argument("--source-dir", required=True)
args = ap.parse_args()

spec = importlib.util.spec_from_file_location("output_dir", os.path.join(args.source_dir, "python", "rematlab",
                                                                           "output_dir.py"))
output_dir = importlib.util.module_from_spec(spec)
spec.loader.exec_module(output_dir)


def on_alarm(signum, frame):
    raise TimeoutError("waited on a FIFO")


signal.signal(signal.SIGALRM, on_alarm)


def text_of(v):
    if isinstance(v, str):
        return v.encode()
    if "json" in v:
        return json.dumps(v["json"]).encode()
    if "raw" in v:
        return v["raw"].encode()
    return bytes.fromhex(v["hex"])


def build(d, tree, outside):
    os.makedirs(d, exist_ok=True)
    for name, v in tree.items():
        p = os.path.join(d, name)
        if isinstance(v, dict) and "dir" in v:
            build(p, v["dir"], outside)
        elif isinstance(v, dict) and "fifo" in v:
            os.mkfifo(p)
        elif isinstance(v, dict) and "symlink" in v:
            os.symlink(v["symlink"], p)
        elif isinstance(v, dict) and "hardlink" in v:
            other = os.path.join(outside, "user-%d" % len(os.listdir(outside)))
            with open(other, "wb") as f:
                f.write(text_of(v["hardlink"]))
            os.link(other, p)
        else:
            with open(p, "wb") as f:
                f.write(text_of(v))


work = tempfile.mkdtemp(prefix="ownership-e2e-")
try:
    with open(os.path.join(args.source_dir, "tests", "data", "ownership", "cases.json")) as f:
        cases = json.load(f)["cases"]
    for i, c in enumerate(cases):
        base = os.path.join(work, "case-%d" % i)
        os.makedirs(os.path.join(base, "outside"))
        build(os.path.join(base, "case"), c["tree"], os.path.join(base, "outside"))
        signal.alarm(20)
        try:
            why = output_dir.why_not_ours(os.path.join(base, "case"))
        except TimeoutError as e:
            why = None
            check(False, "%s: %s" % (c["name"], e))
        finally:
            signal.alarm(0)
        if why is None:
            continue
        check((why == "") == c["ours"], "%s: judged %s: %s" % (c["name"], "ours" if why == "" else "not ours", why))
        if "names" in c:
            check(c["names"] in why, "%s: the reason should name %r: %s" % (c["name"], c["names"], why))
    print("%d ownership cases judged" % len(cases))

    try:
        import torch
    except ImportError:
        print("skipped the recorder's cases: no torch for %s" % sys.executable)
        torch = None
    if torch is not None:
        sys.path.insert(0, os.path.join(args.source_dir, "python"))
        import rematlab  # noqa: E402

        batch = Batch(args.bin)
        torch.manual_seed(0)
        torch.set_num_threads(1)

        class Tiny(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = torch.nn.ModuleList([torch.nn.Linear(8, 8) for _ in range(2)])

            def forward(self, x):
                for b in self.blocks:
                    x = torch.tanh(b(x))
                return x.square().mean()

        model = Tiny()

        def record(out, loss_value=None, **kw):
            with rematlab.record(out, model=model, profile=False, **kw) as rec:
                loss = model(torch.randn(4, 8))
                loss.backward()
                rec.loss(loss if loss_value is None else loss_value)
            return rec

        def refused(out, what, *words):
            signal.alarm(20)
            try:
                record(out, overwrite=True)
                check(False, "record(overwrite=True) replaced %s" % what)
            except FileExistsError as e:
                for w in words:
                    check(w in str(e), "record over %s: the message should name %r: %s" % (what, w, e))
            except TimeoutError:
                check(False, "record over %s waited on a FIFO" % what)
            finally:
                signal.alarm(0)

        # A user's directory whose summary.json merely says "format": "rematlab-run".
        proj = os.path.join(work, "proj")
        os.mkdir(proj)
        with open(os.path.join(proj, "summary.json"), "w") as f:
            json.dump({"format": "rematlab-run"}, f)
        with open(os.path.join(proj, "thesis.tex"), "w") as f:
            f.write("work")
        refused(proj, "a thesis beside a summary that says rematlab-run", "thesis.tex")
        check(open(os.path.join(proj, "thesis.tex")).read() == "work", "thesis.tex survives record(overwrite=True)")
        batch.refuses(["run", "--model", "tiny", "--steps", "1", "--warmup", "0", "--out", proj, "--force"],
                      "thesis.tex")
        check(open(os.path.join(proj, "thesis.tex")).read() == "work", "thesis.tex survives run --force")
        # A FIFO summary.json: refused at once, never waited on.
        fifo_dir = os.path.join(work, "fifo")
        os.mkdir(fifo_dir)
        os.mkfifo(os.path.join(fifo_dir, "summary.json"))
        refused(fifo_dir, "a FIFO summary.json", "summary.json")

        # An earlier recording is replaced by record(overwrite=True) and by run --force alike.
        rec_dir = os.path.join(work, "rec")
        record(rec_dir)
        record(rec_dir, overwrite=True)
        check(sorted(os.listdir(rec_dir)) == sorted(["summary.json", "schedule.json", "memory_events.csv", "ops.csv",
                                                    "schedule.csv", "ledger.csv", "loss.csv", "saved_tensors.csv",
                                                    "module_calls.csv", "op_outputs.csv"]),
              "a recording replaced by a recording holds its files: %s" % sorted(os.listdir(rec_dir)))
        batch.run("run", "--model", "tiny", "--steps", "1", "--warmup", "0", "--out", rec_dir, "--force")
        check(not os.path.exists(os.path.join(rec_dir, "saved_tensors.csv")), "run --force replaces a recording")
        record(rec_dir, overwrite=True)
        check(os.path.exists(os.path.join(rec_dir, "saved_tensors.csv")), "record(overwrite=True) replaces a run")

        # A hard-linked marker (a leftover's, or a run's) makes the directory not ours.
        notes = os.path.join(work, "notes.txt")
        with open(notes, "w") as f:
            f.write("the user's notes")
        os.link(notes, os.path.join(rec_dir, ".rematlab-writing"))
        refused(rec_dir, "a run whose marker is a hard link", "links")
        batch.refuses(["run", "--model", "tiny", "--steps", "1", "--warmup", "0", "--out", rec_dir, "--force"], "links")
        check(open(notes).read() == "the user's notes", "a hard-linked marker's file is never written through")
        os.unlink(os.path.join(rec_dir, ".rematlab-writing"))

        # An infinite loss: a diverged run (complete false, loss null), in strict JSON.
        inf_dir = os.path.join(work, "inf")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            record(inf_dir, loss_value=float("inf"))
        check(any("diverged" in str(x.message) for x in w), "an infinite loss is warned about as diverged")

        def strict(name):
            raise ValueError("bare %s in summary.json" % name)

        with open(os.path.join(inf_dir, "summary.json")) as f:
            s = json.loads(f.read(), parse_constant=strict)
        check(s["complete"] is False and s["status"] == "error" and "diverged" in s.get("error", ""),
              "an infinite loss is a diverged run: %s %s" % (s["status"], s.get("error")))
        check(s["loss"] == [None], "the infinite loss is null in summary.json: %s" % s["loss"])
        p = batch.run("compare", inf_dir)
        check("error" in p.stdout, "compare reads the diverged recording: %r" % p.stdout[-300:])
finally:
    shutil.rmtree(work, ignore_errors=True)
sys.exit(exit_code("ownership: one rule, both writers"))
