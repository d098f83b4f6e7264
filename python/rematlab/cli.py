"""The package from a shell (docs/own-model.md, "From a shell"):

  python -m rematlab record ENTRY --out DIR     record one step of the model ENTRY makes
  python -m rematlab plan --from-run DIR [--plan P ...]   predict plans for a recorded run
  python -m rematlab predict ENTRY [--plan P ...]         record, then predict (nothing kept)

ENTRY is FILE.py:FUNC or package.module:FUNC; FUNC() returns (model, step) or (model, step,
optimizer), or a dict with keys model, step and optionally optimizer and model_config, where
step() runs one training step's forward and backward (and the optimizer's step). Exit status 0,
1 for an error (said on one line; an exception in the user's own code shows its traceback), 2
for a command line that is not understood."""
import argparse
import importlib
import importlib.util
import json
import os
import sys

import torch

from .predict import check_plans, loss_value, predict, predict_run
from .recorder import record


class UsageError(Exception):
    pass


class _UserCodeError(Exception):
    """An exception of the user's own code (the entry function, the step), raised again as it was."""

    def __init__(self, original):
        super().__init__(str(original))
        self.original = original


def _users(fn):
    def call(*a, **k):
        try:
            return fn(*a, **k)
        except Exception as e:  # noqa: BLE001 (re-raised as it was by main)
            raise _UserCodeError(e) from None
    return call


def _load_entry(spec):
    if ":" not in spec:
        raise UsageError("entry %r: give FILE.py:FUNC or package.module:FUNC" % spec)
    where, func = spec.rsplit(":", 1)
    if where.endswith(".py"):
        if not os.path.isfile(where):
            raise UsageError("entry %r: no file %s" % (spec, where))
        sys.path.insert(0, os.path.dirname(os.path.abspath(where)))
        mspec = importlib.util.spec_from_file_location("rematlab_entry", where)
        module = importlib.util.module_from_spec(mspec)
        sys.modules["rematlab_entry"] = module  # as an imported module is (dataclasses look it up)
        _users(mspec.loader.exec_module)(module)
    else:
        sys.path.insert(0, os.getcwd())
        try:
            found = importlib.util.find_spec(where)
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise UsageError("entry %r: no module %s (give FILE.py:FUNC, or a module on the path)" % (spec, where))
        module = _users(importlib.import_module)(where)
    fn = getattr(module, func, None)
    if not callable(fn):
        raise UsageError("entry %r: %s has no function %s" % (spec, where, func))
    made = _users(fn)()
    if isinstance(made, (tuple, list)) and len(made) in (2, 3):
        made = dict(zip(("model", "step", "optimizer"), made))
    if isinstance(made, dict):
        if "model" not in made or "step" not in made:
            raise UsageError("entry %r: the dict %s() returns needs keys model and step" % (spec, func))
        if not callable(made["step"]):
            raise UsageError("entry %r: the step %s() returns is not callable" % (spec, func))
        if not isinstance(made["model"], torch.nn.Module):
            raise UsageError("entry %r: the model %s() returns is a %s, not a torch.nn.Module"
                             % (spec, func, type(made["model"]).__name__))
        made["step"] = _users(made["step"])
        return made
    raise UsageError("entry %r: %s() returned %s; return (model, step), (model, step, optimizer) or a dict"
                     % (spec, func, type(made).__name__))


def _bytes(n):
    if n is None:
        return "unknown"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return "%.2f %s (%d)" % (n / size, unit, n)
    return "%d B" % n


def _print(preds, json_out, source):
    if json_out:
        rows = []
        for p in preds.values():
            row = dict(p.raw)
            row.update(source)
            rows.append(row)
        print(json.dumps(rows, indent=2))
        return
    first = next(iter(preds.values()))
    print("recorded step: saved for backward %s, peak %s" % (_bytes(first.recorded_saved_bytes),
                                                            _bytes(first.recorded_peak_bytes)))
    print("%-24s %-24s %-24s %-24s %s" % ("plan", "saved for backward", "peak", "peak without recompute",
                                          "recompute FLOPs"))
    for p in preds.values():
        print("%-24s %-24s %-24s %-24s %s" % (p.plan, _bytes(p.saved_bytes), _bytes(p.peak_bytes),
                                              _bytes(p.held_peak_bytes),
                                              "unknown" if p.recompute_flops is None else p.recompute_flops))


def _parser():
    ap = argparse.ArgumentParser(prog="python -m rematlab", description="Record a PyTorch training step and "
                                 "predict checkpoint plans for it (docs/own-model.md).")
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record", help="record one training step as a run directory")
    r.add_argument("entry", help="FILE.py:FUNC or package.module:FUNC returning (model, step[, optimizer])")
    r.add_argument("--out", required=True, help="the run directory to write (must not exist)")
    r.add_argument("--overwrite", action="store_true", help="replace an earlier run directory of RematLab's own")
    r.add_argument("--no-profile", action="store_true", help="without torch.profiler (no ops, no FLOPs)")
    for name, helptext in (("plan", "predict plans for a recorded run directory"),
                           ("predict", "record one step, then predict plans for it")):
        p = sub.add_parser(name, help=helptext)
        if name == "plan":
            p.add_argument("--from-run", required=True, metavar="DIR", help="a run directory rematlab.record wrote")
        else:
            p.add_argument("entry", help="FILE.py:FUNC or package.module:FUNC returning (model, step[, optimizer])")
            p.add_argument("--no-profile", action="store_true", help="without torch.profiler (recompute FLOPs unknown)")
        p.add_argument("--plan", action="append", metavar="PLAN",
                       help="none, per-block, every:K, segments:K, sqrt, modules:GLOB[,GLOB], "
                            "selective:keep=CLASS[@PLAN]; repeat for several (default: none and per-block)")
        p.add_argument("--json", action="store_true", help="a JSON list, one object per plan")
    return ap


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except _UserCodeError as e:
        error = e.original
    raise error  # the user's own code: its traceback, as it was


def _run(args):
    try:
        if args.command == "record":
            made = _load_entry(args.entry)
            with record(args.out, model=made["model"], optimizer=made.get("optimizer"),
                        profile=not args.no_profile, model_config=made.get("model_config"),
                        overwrite=args.overwrite) as rec:
                loss = loss_value(made["step"]())
                if loss is not None:
                    rec.loss(loss)
            print("recorded %s: %d blocks, %d bytes saved for backward" % (
                rec.path, rec.summary["recorded"]["blocks"], rec.summary["recorded"]["saved_bytes_at_backward"]))
            return 0
        plans = args.plan or ["none", "per-block"]
        check_plans(plans)
        if args.command == "plan":
            if not os.path.isdir(args.from_run):
                raise UsageError("--from-run %s: not a directory" % args.from_run)
            _print(predict_run(args.from_run, plans), args.json, {"from_run": args.from_run})
            return 0
        made = _load_entry(args.entry)
        _print(predict(made["model"], made["step"], plans, optimizer=made.get("optimizer"),
                       model_config=made.get("model_config"), profile=not args.no_profile),
               args.json, {"entry": args.entry})
        return 0
    except (UsageError, ValueError, RuntimeError, OSError) as e:
        print("python -m rematlab %s: error: %s" % (args.command, e), file=sys.stderr)
        return 1
