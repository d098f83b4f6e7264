"""Writing a recorded step as a RematLab run directory (docs/trace-format.md): written under a
temporary name with the writing marker, summary.json last, then moved into place, so a step
that failed or a write cut short never leaves a directory that looks complete."""
import bisect
import csv
import ctypes
import hashlib
import json
import math
import os
import platform
import shutil
import sys
import time
import warnings

import torch

from . import output_dir
from .op_classes import OP_CLASSES
from .output_dir import check_target  # noqa: F401 (the recorder checks its target before the step)
from .schedule import block_schedule

EVENTS_COLS = ["t_ns", "step", "id", "delta_bytes", "category", "block", "tensor", "phase", "space",
               "reserved_bytes", "op_seq"]
OPS_COLS = ["start_ns", "end_ns", "stream", "name", "op", "block", "phase", "step", "flops", "bytes", "op_id"]
SCHED_COLS = ["index", "action", "block", "keep", "phase", "start_ns", "end_ns", "step"]
LEDGER_COLS = ["block", "tensor", "bytes", "category", "created_phase", "created_ns", "freed_ns", "decision",
               "alloc_id", "free_id"]
LOSS_COLS = ["step", "counted", "loss", "time_ms", "peak_bytes", "reserved_bytes", "start_ns", "end_ns"]
SAVED_COLS = ["id", "module", "block", "category", "phase", "op", "node", "producer", "dtype", "shape", "bytes",
              "storage", "storage_bytes", "alias", "packed_ns", "unpacked_ns", "released_ns", "held_at_backward"]
OUTPUT_COLS = ["id", "op", "op_class", "module", "block", "dtype", "shape", "bytes", "storage", "storage_bytes"]
CALLS_COLS = ["index", "module", "block", "phase", "start_ns", "end_ns", "parent", "flops", "inputs"]


def _write_csv(path, cols, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(cols)
        for r in rows:
            w.writerow([r[c] for c in cols])
    return len(rows)


def _fmt_float(x):
    return "nan" if x != x else repr(float(x))


def tensor_name(rec, row):
    """A saved tensor's name: its module path (inside its block, without the block's prefix)
    and the backward node that saved it (else the forward op)."""
    what = row["node"] or row["op"] or "saved"
    path, b = row["module"], row["block"]
    if b >= 0:
        head = rec.block_prefix + str(b)
        path = path[len(head) + 1:] if path.startswith(head + ".") else ""
    return path + ":" + what if path else what


def grad_checksum(model):
    """BLAKE2b-64 of the bits of every gradient, in named_parameters order."""
    h = hashlib.blake2b(digest_size=8)
    if model is not None:
        for name, p in model.named_parameters():
            if p.grad is None:
                continue
            g = p.grad.detach().to("cpu").contiguous()
            h.update(name.encode())
            h.update(ctypes.string_at(g.data_ptr(), g.numel() * g.element_size()))
    return h.hexdigest()


def model_json(rec):
    """summary.json's `model`: RematLab model keys describing the recorded model's shape,
    inferred where it can be and overridden by record(model_config=...)."""
    m = rec.model
    hidden, vocab, heads = 64, 256, 1
    embedding = False
    if m is not None:
        for mod in m.modules():
            if isinstance(mod, torch.nn.Embedding):
                vocab, hidden = mod.num_embeddings, mod.embedding_dim
                embedding = True
                break
        for mod in m.modules():
            for attr in ("n_head", "num_heads", "n_heads", "heads"):
                v = getattr(mod, attr, None)
                if isinstance(v, int) and v > 0 and hidden % v == 0:
                    heads = v
                    break
            else:
                continue
            break
    batch, seq = (rec.input_shape + (1, 1))[:2] if rec.input_shape else (1, 1)
    cfg = {"name": type(m).__name__ if m is not None else "pytorch", "architecture": "gpt2",
           "layers": max(rec.blocks, 1), "hidden": hidden, "heads": heads, "kv_heads": heads,
           "ffn": 4 * hidden, "seq": int(seq), "batch": int(batch), "vocab": vocab, "positions": int(seq),
           "dtype": "fp32", "dropout": 0.0}
    # What could not be read off a language model is a placeholder: say so, unless given.
    guessed = [k for k, ok in (("hidden", embedding), ("vocab", embedding),
                               ("seq", getattr(rec, "input_is_tokens", False)),
                               ("batch", getattr(rec, "input_is_tokens", False))) if not ok and k not in rec.model_config]
    if guessed and m is not None:
        warnings.warn("rematlab.record: %s is not a language model with token inputs and an nn.Embedding, so "
                      "summary.json's model describes it with placeholders (%s; architecture gpt2); give "
                      "record(model_config={...}) to describe it (the recorded tensors, ops and memory are exact "
                      "either way)" % (type(m).__name__, ", ".join("%s %s" % (k, cfg[k]) for k in guessed)))
    cfg.update(rec.model_config)
    return cfg


def _events(rec, ops, name_of):
    starts = [o["start_ns"] for o in ops]
    rows = []
    for e in rec.events:
        kind, x = e["name"]
        name = name_of(rec.saved[x]) if kind == "saved" else ("optimizer." + x if kind == "optimizer" else x)
        rows.append({"t_ns": e["t_ns"], "step": e["step"], "id": e["id"], "delta_bytes": e["delta"],
                     "category": e["category"], "block": e["block"], "tensor": name, "phase": e["phase"],
                     "space": "device", "reserved_bytes": e["live"],
                     "op_seq": bisect.bisect_left(starts, e["t_ns"])})
    return rows


def _memory_figures(rec):
    """Peak of tracked bytes over the step, its live allocations, and the activation peak."""
    live, act, peak, act_peak, at = 0, 0, 0, 0, -1
    for i, e in enumerate(rec.events):
        live += e["delta"]
        if e["category"] in ("saved_activations", "checkpoints"):
            act += e["delta"]
        if i < rec._first_event:
            peak, at = live, i
            continue
        if live > peak:
            peak, at = live, i
        act_peak = max(act_peak, act)
    alive = {}  # allocation id -> the row of its event (every allocation has its own id)
    for i, e in enumerate(rec.events[:at + 1]):
        if e["delta"] > 0:
            alive[e["id"]] = i
        else:
            alive.pop(e["id"], None)
    static = sum(e["delta"] for e in rec.events if e["category"] in ("parameters", "gradients", "optimizer_state"))
    return peak, alive, act_peak, static


def write_run(rec, profile, snapshot):
    ops = profile.ops if profile is not None else []
    for i, o in enumerate(ops):
        o["op_id"], o["step"], o["bytes"] = i, 0, 0
    name_of = lambda row: tensor_name(rec, row)  # noqa: E731
    plan = getattr(rec.model, "_rematlab_plan", None) if rec.model is not None else None
    schedule, sched_rows, plan_stats = block_schedule(rec, plan, ops)
    peak, alive, act_peak, static = _memory_figures(rec)
    ledger, per_block = [], [0] * max(rec.blocks, 1)
    for r in rec.saved:
        if r["block"] < 0 or r["alias"]:
            continue
        ledger.append({"block": r["block"], "tensor": name_of(r), "bytes": r["storage_bytes"],
                       "category": r["category"], "created_phase": r["phase"], "created_ns": r["packed_ns"],
                       "freed_ns": max(r.get("storage_freed_ns", rec.end_ns), r["packed_ns"]),
                       "decision": "checkpoint" if r["category"] == "checkpoints" else "kept",
                       "alloc_id": r["alloc_id"], "free_id": r["free_id"] or r["alloc_id"]})
        if r["held_at_backward"]:
            per_block[r["block"]] += r["storage_bytes"]
    fl = {"forward": 0, "recompute": 0, "backward": 0, "other": 0}
    for o in ops:
        k = "recompute" if o["phase"] == "recompute" else o["phase"] if o["block"] >= 0 and o["phase"] in (
            "forward", "backward") else "other"
        fl[k] += o["flops"]
    fl["total"] = sum(fl.values())
    time_ms = (rec.end_ns - rec.start_ns) / 1e6
    loss = rec.loss_value
    # A loss given as NaN or infinite is a diverged step, written as rematlab-batch writes one:
    # incomplete, status "error", the loss null in summary.json (JSON has no NaN or Infinity).
    diverged = getattr(rec, "loss_given", False) and not math.isfinite(loss)
    if diverged:
        warnings.warn("rematlab.record: the loss is %s; the step is recorded as a diverged run (complete false)"
                      % ("NaN" if loss != loss else "infinite"))
    first_event = rec._first_event
    peak_tensors = sorted(alive.values(), key=lambda i: -rec.events[i]["delta"])[:12]
    events = _events(rec, ops, name_of)
    summary = {
        "format": "rematlab-run", "format_version": 2, "source": "pytorch", "torch_version": torch.__version__,
        "complete": not diverged, "status": "error" if diverged else "ok", "model": model_json(rec),
        "policy": plan.spec if plan is not None else "none", "policy_params": "", "memory_budget_bytes": 0,
        "device": rec.device, "seed": 0, "warmup": 0, "steps": 1,
        "loss": [loss if math.isfinite(loss) else None], "warmup_loss": [],
        "step_time_ms": [time_ms], "step_time_ms_median": time_ms, "step_time_ms_spread": 0.0,
        "step_peak_bytes": [peak], "step_peak_bytes_median": peak, "step_peak_bytes_spread": 0,
        "peak_bytes": peak, "predicted_peak_bytes": 0, "peak_reserved_bytes": peak, "static_bytes": static,
        "activation_peak_bytes": act_peak, "saved_bytes_per_block": per_block,
        "host_bytes_per_block": [0] * len(per_block), "flops": fl,
        "block_forwards": plan_stats["block_forwards"], "plan": plan_stats,
        "grad_checksum": grad_checksum(rec.model), "profiler_overhead_ns": 0,
        "peak_tensors": [{"tensor": events[i]["tensor"], "bytes": rec.events[i]["delta"]} for i in peak_tensors],
        "timeline": {"first_event": first_event, "end_event": len(rec.events), "start_ns": rec.start_ns,
                     "end_ns": rec.end_ns},
        "recorded": {
            "saved_bytes_at_backward": rec.saved_at_backward,
            "backward_start_ns": rec.backward_start_ns if rec.backward_start_ns is not None else rec.end_ns,
            "saved_tensors": len(rec.saved), "blocks": rec.blocks, "blocks_module": (rec.block_prefix or "").rstrip("."),
            "checkpoint_plan": plan.spec if plan is not None else "",
            "op_outputs": len(rec.op_outputs), "op_classes": {c: list(ops) for c, ops in OP_CLASSES.items()},
            "flops_from": "torch.profiler" if profile is not None else "unknown",
            "profiler_memory_peak_bytes": profile.memory_peak_bytes if profile is not None else 0,
            "grad_checksum": "blake2b-64"},
        "provenance": {"program": "rematlab (python)", "version": "0.1.0", "torch": torch.__version__,
                       "python": platform.python_version(), "threads": str(torch.get_num_threads()),
                       "command": " ".join(sys.argv), "os": platform.platform(), "cpu": platform.processor(),
                       "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "format_version": "2"},
    }
    rec.summary = summary  # what summary.json holds (its "files" added as it is written)
    if diverged:
        summary["error"] = "training diverged: the loss of the recorded step is %s" % (
            "NaN" if loss != loss else "infinite")
    loss_rows = [{"step": 0, "counted": 1, "loss": _fmt_float(loss), "time_ms": repr(time_ms), "peak_bytes": peak,
                  "reserved_bytes": peak, "start_ns": rec.start_ns, "end_ns": rec.end_ns}]
    calls = [dict(c, flops="" if c["flops"] is None else c["flops"],
                  inputs=" ".join("%d:%d" % x for x in c["inputs"])) for c in rec.calls]
    return _write_dir(rec.out_dir, rec.overwrite, summary, schedule, [
        ("memory_events.csv", EVENTS_COLS, events), ("ops.csv", OPS_COLS, ops),
        ("schedule.csv", SCHED_COLS, sched_rows), ("ledger.csv", LEDGER_COLS, ledger),
        ("loss.csv", LOSS_COLS, loss_rows), ("saved_tensors.csv", SAVED_COLS, rec.saved),
        ("module_calls.csv", CALLS_COLS, calls), ("op_outputs.csv", OUTPUT_COLS, rec.op_outputs)], snapshot, len(rec.events) - first_event + 2)


def _write_dir(out_dir, overwrite, summary, schedule, tables, snapshot, timeline_rows):
    """Written under a temporary name with the writing marker, summary.json last, then moved into
    place by the rules rematlab-batch follows (output_dir.py)."""
    out_dir = os.path.abspath(out_dir)
    tmp = output_dir.make_temp_dir(out_dir)
    try:
        files = {"memory_timeline.csv": {"rows": timeline_rows}, "schedule.json": {}}
        for fname, cols, rows in tables:
            files[fname] = {"rows": _write_csv(os.path.join(tmp, fname), cols, rows)}
        with open(os.path.join(tmp, "schedule.json"), "w") as f:
            json.dump(schedule, f, indent=2, allow_nan=False)
        if snapshot is not None:
            import pickle
            with open(os.path.join(tmp, "cuda_memory_snapshot.pickle"), "wb") as f:
                pickle.dump(snapshot, f)
        summary["files"] = files
        with open(os.path.join(tmp, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2, sort_keys=True, allow_nan=False)  # last: a directory with it is whole
        output_dir.complete(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return output_dir.move_into_place(tmp, out_dir, overwrite)
