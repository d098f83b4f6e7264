#!/usr/bin/env python3
"""End-to-end test of rematlab-batch, run as a user would run it.

Against a binary (--bin, e.g. build/bin/rematlab-batch) or an installed copy (--install-from
BUILD_DIR: `cmake --install BUILD_DIR --prefix TMP`, then TMP/bin/rematlab-batch). Python
standard library only.

What it checks:
  * a sweep of `tiny` over every policy (none, selective, uniform, revolve, offload, and budget
    runs when the budget plugin is there) writes every file of every run; the CSVs parse with the
    documented columns and row counts; the highest live device bytes of memory_timeline.csv is
    peak_bytes; replaying memory_events.csv gives memory_timeline.csv row for row; ops are in
    time order and do not overlap on a stream (CPU); trace.json is valid Chrome trace JSON;
    every policy's gradients match `none`'s;
  * reading runs back (`compare`, `export`) gives the same figures and the same bytes;
  * bad input (unknown model or policy, bad parameter value or type, missing or corrupt run
    directory, truncated CSV or JSON, a path without write permission) gives a message naming
    the problem and a non-zero exit, and overwrites nothing;
  * --json on every command prints JSON; stderr is quiet when it is not a terminal.

A policy of the five whose plugin source exists in plugins/ but that the binary does not load is
a failure; one whose source has not landed yet is reported and left out.
"""
import argparse
import csv
import hashlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import e2e_common
from e2e_common import check, failures

REQUIRED_POLICIES = ["none", "selective", "uniform", "revolve", "offload"]
CATEGORIES = ["parameters", "gradients", "master_weights", "optimizer_state", "saved_activations",
              "checkpoints", "recompute_temps", "activation_grads", "logits_loss", "workspace",
              "host_offloaded", "unknown"]
COLUMNS = {
    "memory_events.csv": ["t_ns", "step", "id", "delta_bytes", "category", "block", "tensor",
                          "phase", "space", "reserved_bytes", "op_seq"],
    "memory_timeline.csv": ["t_ns", "event", "device_bytes", "host_bytes"] + CATEGORIES,
    "ops.csv": ["start_ns", "end_ns", "stream", "name", "op", "block", "phase", "step", "flops",
                "bytes", "op_id", "ranks"],
    "schedule.csv": ["index", "action", "block", "keep", "phase", "start_ns", "end_ns", "step"],
    "ledger.csv": ["block", "tensor", "bytes", "category", "created_phase", "created_ns",
                   "freed_ns", "decision", "alloc_id", "free_id", "why"],
    "loss.csv": ["step", "counted", "loss", "time_ms", "peak_bytes", "reserved_bytes", "start_ns",
                 "end_ns"],
    "routing.csv": ["micro_batch", "layer", "expert", "routed", "kept"],
}
RUN_FILES = ["summary.json", "schedule.json", "trace.json"] + list(COLUMNS)
STREAM_TID = {"compute": 1, "copy_d2h": 2, "copy_h2d": 3, "host": 4, "comm": 5}

notes = []


Batch = e2e_common.Batch


def read_csv(path):
    with open(path, newline="") as f:
        text = f.read()
    check(text.endswith("\n"), "%s does not end with a line break" % path)
    rows = list(csv.reader(text.splitlines(True)))
    return rows[0], rows[1:]


def tree_digest(path):
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            h.update(os.path.relpath(p, path).encode())
            with open(p, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def check_run_dir(d, device="cpu"):
    """Every file is there and consistent; returns the summary."""
    for f in RUN_FILES:
        if not check(os.path.isfile(os.path.join(d, f)), "%s: missing %s" % (d, f)):
            return None
    with open(os.path.join(d, "summary.json")) as fh:
        s = json.load(fh)
    check(s.get("format") == "rematlab-run" and s.get("format_version") == 6
          and s.get("source") == "rematlab", d + ": summary format")
    check(isinstance(s.get("ignored_config_fields"), list), d + ": summary.json lists ignored_config_fields")
    for key in ("model", "policy", "policy_params", "device", "seed", "warmup", "steps", "loss",
                "step_time_ms", "step_time_ms_median", "step_time_ms_spread", "step_peak_bytes",
                "peak_bytes", "predicted_peak_bytes", "flops", "grad_checksum", "provenance",
                "timeline", "files"):
        check(key in s, "%s/summary.json lacks %s" % (d, key))
    prov = s.get("provenance", {})
    for key in ("version", "git_commit", "format_version", "command", "created"):
        check(key in prov, "%s: provenance lacks %s" % (d, key))
    if device == "cpu":
        for key in ("blas", "threads", "cpu"):
            check(key in prov, "%s: provenance lacks %s" % (d, key))
    tables = {}
    for name, cols in COLUMNS.items():
        header, rows = read_csv(os.path.join(d, name))
        check(header == cols, "%s/%s header %s, documented %s" % (d, name, header, cols))
        check(all(len(r) == len(cols) for r in rows), "%s/%s: a row with the wrong field count" % (d, name))
        check(s["files"][name]["rows"] == len(rows),
              "%s/%s: %d rows, summary.json says %d" % (d, name, len(rows), s["files"][name]["rows"]))
        tables[name] = [dict(zip(cols, r)) for r in rows]

    # Steps and the measurement protocol.
    loss = tables["loss.csv"]
    counted = [r for r in loss if r["counted"] == "1"]
    if s["complete"]:
        check(len(loss) == s["warmup"] + s["steps"], d + ": loss.csv has every step")
        check(len(counted) == s["steps"], d + ": counted steps")
        check([float(r["loss"]) for r in counted] == s["loss"], d + ": loss.csv = summary loss")
        times = [float(r["time_ms"]) for r in counted]
        check(times == s["step_time_ms"], d + ": step times")
        check(abs(statistics.median(times) - s["step_time_ms_median"]) <= 1e-9 * max(1.0, s["step_time_ms_median"]),
              d + ": median step time")
        check(abs((max(times) - min(times)) - s["step_time_ms_spread"]) <= 1e-9 * max(1.0, s["step_time_ms_spread"]),
              d + ": step time spread")
        check(all(math.isfinite(x) for x in s["loss"]), d + ": finite losses")
        check(max(int(r["peak_bytes"]) for r in counted) == s["peak_bytes"], d + ": peak_bytes is the highest step peak")

    # memory_timeline.csv: its highest device total is the peak, and it replays from the events.
    ev = tables["memory_events.csv"]
    tl = tables["memory_timeline.csv"]
    first, end = s["timeline"]["first_event"], s["timeline"]["end_event"]
    if s["complete"]:
        top = max(int(r["device_bytes"]) for r in tl)
        check(top == s["peak_bytes"], "%s: max device_bytes of memory_timeline.csv %d != peak_bytes %d" % (d, top, s["peak_bytes"]))
        check(top == int(counted[-1]["peak_bytes"]), d + ": timeline peak = last counted step's peak")
        check(len(tl) == end - first + 2, d + ": one timeline row per event of the step, plus two")
    else:
        first, end = 0, len(ev)
    live = {c: 0 for c in CATEGORIES}
    dev = host = 0
    for e in ev[:first]:
        live[e["category"]] += int(e["delta_bytes"])
        if e["space"] == "device":
            dev += int(e["delta_bytes"])
        else:
            host += int(e["delta_bytes"])
    ok = True
    expect_rows = []
    expect_rows.append((-1, dev, host, dict(live)))
    for i in range(first, end):
        e = ev[i]
        live[e["category"]] += int(e["delta_bytes"])
        if e["space"] == "device":
            dev += int(e["delta_bytes"])
        else:
            host += int(e["delta_bytes"])
        expect_rows.append((i, dev, host, dict(live)))
    expect_rows.append((-1, dev, host, dict(live)))
    if check(len(expect_rows) == len(tl), d + ": replayed rows = timeline rows"):
        for k, (i, dv, hv, lv) in enumerate(expect_rows):
            r = tl[k]
            got = (int(r["event"]), int(r["device_bytes"]), int(r["host_bytes"]), {c: int(r[c]) for c in CATEGORIES})
            if got != (i, dv, hv, lv):
                ok = False
                check(False, "%s: memory_timeline.csv row %d %s != replay of memory_events.csv %s" % (d, k + 2, got, (i, dv, hv, lv)))
                break
            if i >= 0 and int(r["t_ns"]) != int(ev[i]["t_ns"]):
                check(False, "%s: timeline row %d time differs from its event" % (d, k + 2))
                break
    times = [int(r["t_ns"]) for r in tl]
    check(times == sorted(times), d + ": timeline in time order")
    evt = [int(r["t_ns"]) for r in ev]
    check(evt == sorted(evt), d + ": events in time order")
    # Every allocation is freed once, with the same size.
    sizes = {}
    for e in ev:
        b = int(e["delta_bytes"])
        if b > 0:
            sizes[e["id"]] = b
        else:
            check(sizes.pop(e["id"], None) == -b, "%s: free of id %s without a matching allocation" % (d, e["id"]))
            if failures and failures[-1].startswith(d + ": free"):
                break

    # Ops: time order, no overlap per stream on the CPU.
    ops = tables["ops.csv"]
    starts = [int(r["start_ns"]) for r in ops]
    check(starts == sorted(starts), d + ": ops.csv in time order")
    check(all(int(r["end_ns"]) >= int(r["start_ns"]) for r in ops), d + ": ops end after they start")
    if device == "cpu":
        last_end = {}
        for r in ops:
            st = r["stream"]
            if st in last_end and int(r["start_ns"]) < last_end[st]:
                check(False, "%s: op %s overlaps the one before it on stream %s" % (d, r["name"], st))
                break
            last_end[st] = int(r["end_ns"])
    if s["complete"]:
        check(sum(int(r["flops"]) for r in ops) == s["flops"]["total"], d + ": ops' FLOPs add up to flops.total")
        acts = [r for r in tables["schedule.csv"] if r["action"] != "head"]
        check(len(acts) == s["plan"]["actions"], d + ": one schedule.csv row per action (and the head)")
        check([int(r["index"]) for r in acts] == list(range(len(acts))), d + ": schedule.csv in schedule order")

    # trace.json: valid Chrome trace JSON.
    with open(os.path.join(d, "trace.json")) as fh:
        tj = json.load(fh)
    evs = tj.get("traceEvents") if isinstance(tj, dict) else None
    if check(isinstance(evs, list), d + ": trace.json has a traceEvents array"):
        xs_per_stream = 0
        counters = set()
        for e in evs:
            good = (isinstance(e, dict) and e.get("ph") in ("X", "C", "M") and isinstance(e.get("name"), str)
                    and isinstance(e.get("pid"), int) and isinstance(e.get("ts"), (int, float)))
            if good and e["ph"] == "X":
                good = isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0 and isinstance(e.get("tid"), int)
                xs_per_stream += e["tid"] in STREAM_TID.values()
            if good and e["ph"] == "C":
                good = isinstance(e.get("args"), dict) and all(isinstance(v, (int, float)) for v in e["args"].values())
                counters.add(e["name"])
            if not check(good, "%s: trace.json event not valid Chrome trace: %r" % (d, e)):
                break
        check(xs_per_stream == len(ops), d + ": one trace.json X event per op")
        check("device memory" in counters, d + ": trace.json has the device memory counter")
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin")
    ap.add_argument("--install-from", help="build directory to install to a temporary prefix and test")
    ap.add_argument("--cmake", default="cmake")
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--check-dir", help="only check an existing run or sweep directory")
    ap.add_argument("--device", default="cpu", help="device the checked directory ran on")
    a = ap.parse_args()
    if a.check_dir:
        check_existing(a.check_dir, a.device)
        return finish()
    work = tempfile.mkdtemp(prefix="rematlab-e2e-")
    try:
        if a.install_from:
            prefix = os.path.join(work, "prefix")
            p = subprocess.run([a.cmake, "--install", a.install_from, "--prefix", prefix],
                               capture_output=True, text=True)
            if p.returncode != 0:
                print(p.stdout[-3000:], p.stderr[-3000:])
                check(False, "cmake --install failed")
                return finish()
            # A relocated copy: the install tree must not depend on where it was installed.
            moved = os.path.join(work, "moved")
            shutil.move(prefix, moved)
            binary = os.path.join(moved, "bin", "rematlab-batch")
            for rel in ("lib/rematlab/plugins/none.so", "share/rematlab/presets/tiny.json", "share/rematlab/corpus.txt"):
                check(os.path.exists(os.path.join(moved, rel)), "installed tree lacks " + rel)
            root = moved
        else:
            binary = os.path.abspath(a.bin)
            root = None
        test(Batch(binary), work, a.source_dir, root)
    finally:
        if a.keep:
            print("kept " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return finish()


def check_existing(d, device):
    """Checks a run directory, or every run of a sweep directory, as the sweep test does."""
    if os.path.isfile(os.path.join(d, "sweep.json")):
        header, rows = read_csv(os.path.join(d, "comparison.csv"))
        for r in rows:
            r = dict(zip(header, r))
            s = check_run_dir(os.path.join(d, r["run"]), device)
            check(r["complete"] == "1", "%s completed" % r["run"])
            check(r["grads_match_none"] in ("1", ""), "%s: gradients match none" % r["run"])
            if s:
                check(int(r["peak_bytes"]) == s["peak_bytes"], "%s: comparison.csv peak = summary" % r["run"])
            print("checked %s: peak %s bytes, median %s ms, grads match none: %s"
                  % (r["run"], r["peak_bytes"], r["step_time_ms_median"], r["grads_match_none"]))
    else:
        check_run_dir(d, device)


def finish():
    for n in notes:
        print("NOTE: " + n)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("ok")
    return 0


def check_ignored_config_fields(b, source, w):
    """The fields of an imported config.json that change nothing are listed by plan (its text and
    --json, one process or ranks) and in a run's summary.json; a preset's list is empty."""
    smol = os.path.join(source, "tests", "data", "hf-configs", "smollm2-135m.json")
    ignored = ["is_llama_config", "pretraining_tp", "rope_interleaved"]
    for args in ([], ["--tp", "3"]):
        plan = b.json("plan", "--model", smol, *args, "--json")
        if plan is not None:
            check(all(f in plan.get("ignored_config_fields", []) for f in ignored),
                  "plan %s --json lists %r: %r" % (args, ignored, plan.get("ignored_config_fields")))
    text = b.run("plan", "--model", smol).stdout
    line = [x for x in text.splitlines() if x.startswith("ignored config fields")]
    check(len(line) == 1 and all(f in line[0] for f in ignored), "plan's text lists %r: %r" % (ignored, line))
    tiny_plan = b.json("plan", "--model", "tiny", "--json")
    check(tiny_plan is not None and tiny_plan.get("ignored_config_fields") == [], "a preset's plan ignores nothing")
    # A model of several layer kinds says how many layers each has (SmolLM3: every fourth without RoPE).
    smol3 = os.path.join(source, "tests", "data", "hf-configs", "smollm3-3b.json")
    kinds = [x for x in b.run("plan", "--model", smol3).stdout.splitlines() if x.startswith("layer kinds")]
    check(kinds == ["layer kinds           27 full_attention, 9 full_attention_no_rope (no RoPE)"],
          "plan of SmolLM3 counts its layer kinds: %r" % kinds)
    check(not any(x.startswith("layer kinds") for x in b.run("plan", "--model", "tiny").stdout.splitlines()),
          "a model of one kind lists no layer kinds")
    # A mixture of experts says its router and the routing its prediction assumes; with dense layers
    # among the experts, which layers are which.
    qmoe = json.load(open(os.path.join(source, "tests", "data", "hf-configs", "qwen3-30b-a3b.json")))
    qmoe["mlp_only_layers"] = [0, 1]
    qpath = w("qwen3-moe-dense-first.json")
    with open(qpath, "w") as f:
        json.dump(qmoe, f)
    lines = b.run("plan", "--model", qpath, "--seq", "256").stdout.splitlines()
    experts = [x for x in lines if x.startswith("experts")]
    check(experts == ["experts               128 routed, top-8 by softmax, renormalised; dropless: 2048 rows per "
                      "layer whatever the routing"], "plan of Qwen3-30B-A3B says its routing: %r" % experts)
    kinds = [x for x in lines if x.startswith("layer kinds")]
    check(kinds == ["layer kinds           2 full_attention+dense_mlp, 46 full_attention+moe (experts)"],
          "plan counts dense and expert layers: %r" % kinds)
    cap = b.json("plan", "--model", "mixtral-8x7b", "--seq", "512", "--json")
    check(cap is not None and cap.get("experts", {}).get("routing") == "dropless" and
          cap["experts"].get("rows_per_layer") == 1024, "plan --json of Mixtral gives its routing: %r" %
          (cap or {}).get("experts"))
    ds = [x for x in b.run("plan", "--model", "deepseek-v3").stdout.splitlines() if x.startswith(("latent", "experts"))]
    check(ds == ["latent attention      q rank 1536, kv rank 512; 128 heads of 128 + 64 rotated (q, k; the rotated key "
                 "part shared), values of 128",
                 "experts               256 routed, top-8 by sigmoid, renormalised, 4 of 8 groups (by their two best), "
                 "selection bias, weights x 2.5; shared experts of 2048; dropless: 32768 rows per layer whatever the "
                 "routing"], "plan of DeepSeek-V3 says its attention and routing: %r" % ds)
    # A small config in the same layout, with the same fields, trains a step and says so.
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
           "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
           "vocab_size": 256, "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "tie_word_embeddings": True, "is_llama_config": True, "rope_interleaved": False, "pretraining_tp": 1}
    path = w("small-llama.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    out = w("small-llama-run")
    s = b.json("run", "--model", path, "--seq", "16", "--batch", "1", "--steps", "1", "--warmup", "0", "--out", out,
               "--json")
    if s is not None:
        check(all(f in s.get("ignored_config_fields", []) for f in ignored),
              "run --json lists %r: %r" % (ignored, s.get("ignored_config_fields")))
        with open(os.path.join(out, "summary.json")) as f:
            on_disk = json.load(f)
        check(on_disk.get("ignored_config_fields") == s.get("ignored_config_fields"),
              "summary.json lists the run's ignored fields")


def check_frontier(b):
    """`frontier`: the budget policy's recompute FLOPs from its smallest budget (which plan
    refuses one byte below, naming it) to none's activation peak (no recomputation), never rising
    as the budget grows, each point's plan within its budget and equal to what `plan` gives at
    that budget; every other policy's point beside it; bad input refused in words."""
    f = b.json("frontier", "--model", "tiny", "--points", "8", "--json")
    if f is None:
        return
    line, low, high = f["line"], f["smallest_budget_bytes"], f["store_all_bytes"]
    check(len(line) == 8 and line[0]["budget_bytes"] == low and line[-1]["budget_bytes"] == high,
          "frontier: 8 budgets from %d to %d: %r" % (low, high, [p["budget_bytes"] for p in line]))
    check(all(a["budget_bytes"] < c["budget_bytes"] and a["recompute_flops"] >= c["recompute_flops"]
              for a, c in zip(line, line[1:])), "frontier: budgets rise, recompute FLOPs never do: %r" % line)
    check(all(p["activation_peak_bytes"] <= p["budget_bytes"] for p in line), "frontier: every plan within its budget")
    check(line[-1]["recompute_flops"] == 0 and line[0]["recompute_flops"] > 0,
          "frontier: recomputation at the smallest budget, none at store-all: %r" % line)
    b.refuses(["plan", "--model", "tiny", "--policy", "budget", "--memory-budget", str(low - 1)],
              "smallest feasible budget is %d bytes" % low)
    mid = line[4]
    if not mid["from_smaller_budget"]:
        p = b.json("plan", "--model", "tiny", "--policy", "budget", "--memory-budget", str(mid["budget_bytes"]), "--json")
        check(p is not None and p["recompute_flops"] == mid["recompute_flops"] and
              p["activation_peak_bytes"] == mid["activation_peak_bytes"],
              "frontier: its point at %d bytes is plan's at that budget" % mid["budget_bytes"])
    points = {p["policy"]: p for p in f["policies"]}
    check(points.get("none", {}).get("activation_peak_bytes") == high and points["none"]["recompute_flops"] == 0,
          "frontier: none's point is store-all with no recomputation: %r" % points.get("none"))
    check({"selective", "selective:modules=core_attn+mlp", "uniform", "revolve"} <= set(points),
          "frontier: the other policies' points: %r" % sorted(points))
    check("budget" not in points, "frontier: the line's own policy is not a point")
    b.refuses(["frontier", "--model", "tiny", "--policy", "selective"], "does not plan to a memory budget", "budget")
    b.refuses(["frontier", "--model", "tiny", "--points", "1"], "--points")
    # optimal: its minimum cut a point of budget's frontier; its own line starts lower and lies on
    # or under budget's at every budget of budget's line; below its smallest budget it refuses.
    check(points.get("optimal", {}).get("params") == "min-cut", "frontier: optimal's minimum cut is a point: %r" % sorted(points))
    t = b.run("plan", "--model", "tiny", "--policy", "optimal").stdout
    check("per block             blocks 0-3: forward keep=block.in,attn.qkv,ln2.in,mlp.gelu_in; backward rebuilding ln1.out," in t,
          "plan: what optimal's minimum cut keeps in every block and rebuilds inside the backward: %r" % t)
    o = b.json("frontier", "--model", "tiny", "--policy", "optimal", "--points", "8", "--json")
    if o is None:
        return
    check(o["smallest_budget_bytes"] < low and o["line"][-1]["recompute_flops"] == 0,
          "frontier --policy optimal: from %d (budget: %d) to none's peak" % (o["smallest_budget_bytes"], low))
    for p in line[:5:2]:
        q = b.json("plan", "--model", "tiny", "--policy", "optimal", "--memory-budget", str(p["budget_bytes"]), "--json")
        check(q is not None and q["recompute_flops"] <= p["recompute_flops"] and q["activation_peak_bytes"] <= p["budget_bytes"],
              "plan --policy optimal at %d bytes: no more recompute than budget's" % p["budget_bytes"])
    b.refuses(["plan", "--model", "tiny", "--policy", "optimal", "--memory-budget", str(o["smallest_budget_bytes"] - 1)],
              "smallest feasible budget is %d bytes" % o["smallest_budget_bytes"])


def check_cuda_target(b, cpu_plan):
    """plan --device cuda: the same walk with the CUDA backend's workspace, its reserved bytes, and
    with --gpu-memory whether they fit; the CPU plan has none of these."""
    cuda = b.json("plan", "--model", "tiny", "--device", "cuda", "--json")
    if cuda is None:
        return
    check(cpu_plan.get("device") == "cpu" and "reserved_bytes" not in cpu_plan, "plan --json: device cpu")
    check(cuda["device"] == "cuda" and cuda["measured_on_gpu"] is False, "plan --device cuda --json: device")
    check(cuda["activation_peak_bytes"] == cpu_plan["activation_peak_bytes"] and
          cuda["predicted_peak_bytes"] - cuda["workspace_bytes"] ==
          cpu_plan["predicted_peak_bytes"] - cpu_plan["workspace_bytes"],
          "plan --device cuda: the same step with another workspace")
    check(cuda["workspace_bytes"] >= 32 << 20, "plan --device cuda: cuBLASLt's 32 MiB in the workspace")
    check(cuda["reserved_bytes"] >= cuda["rounded_peak_bytes"] >= cuda["predicted_peak_bytes"] and
          cuda["reserved_is_lower_bound"] is False, "plan --device cuda: reserved >= live blocks rounded >= peak")
    offload = b.json("plan", "--model", "tiny", "--device", "cuda", "--policy", "offload", "--json")
    check(offload is not None and offload["reserved_is_lower_bound"] is True,
          "plan --device cuda --policy offload: reserved is the least the allocator holds")
    fits = b.json("plan", "--model", "tiny", "--device", "cuda", "--gpu-memory", str(cuda["reserved_bytes"]),
                  "--json")
    tight = b.json("plan", "--model", "tiny", "--device", "cuda", "--gpu-memory",
                   str(cuda["rounded_peak_bytes"]), "--json")
    small = b.json("plan", "--model", "tiny", "--device", "cuda", "--gpu-memory", "1MiB", "--json")
    if fits and tight and small:
        check(fits["fits"] and fits["fits_after_cache_release"], "--gpu-memory of the reserved bytes fits")
        check(tight["fits"] == (cuda["reserved_bytes"] == cuda["rounded_peak_bytes"]) and
              tight["fits_after_cache_release"], "--gpu-memory of the rounded live blocks fits after the cache is released")
        check(not small["fits"] and not small["fits_after_cache_release"], "--gpu-memory 1MiB does not fit")
    text = b.run("plan", "--model", "tiny", "--device", "cuda", "--gpu-memory", "1MiB").stdout
    check("not measured on a GPU" in text and "fits in 1.00 MiB" in text and "no (" in text,
          "plan --device cuda text: %s" % text[-400:])
    # Over ranks: each stage's rank reserves its own; the most of them is the figure.
    rank = b.json("plan", "--model", "tiny", "--tp", "2", "--pp", "2", "--device", "cuda", "--json")
    if rank is not None:
        res = [st["reserved_bytes"] for st in rank["stages"]]
        check(all(r >= st["peak_bytes"] for r, st in zip(res, rank["stages"])) and
              rank["reserved_bytes"] == max(res), "plan --pp --device cuda: per-stage reserved bytes %r" % res)
    cpu_rank = b.json("plan", "--model", "tiny", "--tp", "2", "--pp", "2", "--json")
    check(cpu_rank is not None and all(st["reserved_bytes"] is None for st in cpu_rank["stages"]),
          "plan --pp on the CPU: no reserved bytes")
    b.refuses(["plan", "--model", "tiny", "--gpu-memory", "80GiB"], "--gpu-memory needs --device cuda")
    b.refuses(["plan", "--model", "tiny", "--device", "cuda", "--gpu-memory", "0"], "gpu-memory", "0 bytes")
    b.refuses(["plan", "--paper-figure7", "--device", "cuda"], "take no --device")


def test(b, work, source, installed_root):
    w = lambda *p: os.path.join(work, *p)

    # --- what is there
    pol = b.json("list", "policies", "--json")
    if pol is None:
        return
    names = [p["name"] for p in pol["policies"]]
    check(not pol["rejected"], "rejected plugins: %r" % pol["rejected"])
    if installed_root:
        for p in pol["policies"]:
            check(os.path.realpath(p["file"]).startswith(os.path.realpath(installed_root)),
                  "installed binary loads %s from outside its tree" % p["file"])
    for r in REQUIRED_POLICIES:
        if r not in names:
            if os.path.isdir(os.path.join(source, "plugins", r)):
                check(False, "policy %s has a plugin in plugins/ but the binary does not load it" % r)
            else:
                notes.append("policy %s has not landed yet; the sweep leaves it out" % r)
    models = b.json("list", "models", "--json")
    check(models is not None and any(m.get("name") == "tiny" for m in models), "list models --json has tiny")
    plan = b.json("plan", "--model", "tiny", "--json")
    check(plan is not None and plan.get("predicted_peak_bytes", 0) > 0, "plan --json")
    rank = b.json("plan", "--model", "tiny", "--tp", "2", "--sp", "--pp", "2", "--dp", "2", "--zero", "1",
                  "--policy", "selective", "--json")
    if rank is not None:
        check(rank["layout"]["tp"] == 2 and rank["layout"]["micro_batches"] == 2 and
              [st["in_flight"] for st in rank["stages"]] == [2, 1] and
              rank["predicted_peak_bytes"] == max(st["peak_bytes"] for st in rank["stages"]),
              "plan over ranks --json: %r" % {k: rank.get(k) for k in ("layout", "stages")})
    fig = b.json("plan", "--paper-figure7", "--json")
    check(fig is not None and [f["model"] for f in fig] ==
          ["megatron-22b", "megatron-175b", "megatron-530b", "megatron-1t"] and
          all(f["strategies"][0]["percent"] == 100 and len(f["strategies"]) == 5 for f in fig),
          "plan --paper-figure7 --json")
    check_ignored_config_fields(b, source, w)
    check_cuda_target(b, plan)
    check_frontier(b)
    b.refuses(["plan", "--model", "tiny", "--tp", "3"], "heads 4 is not divisible by tp 3")
    b.refuses(["plan", "--model", "tiny", "--pp", "3"], "layers 4 is not divisible by pp 3")

    # --- the sweep (the README's command, with every policy and budget runs)
    sweep_list = []
    for n in REQUIRED_POLICIES:
        if n in names:
            sweep_list.append("revolve:snapshots=3" if n == "revolve" else n)
    sweep_list += [n for n in names if n not in REQUIRED_POLICIES and n != "budget"]
    args = ["sweep", "--model", "tiny", "--policies", ",".join(sweep_list), "--out", w("sweep"),
            "--steps", "2", "--warmup", "1"]
    if "budget" in names:
        args += ["--memory-budgets", "2MiB,4MiB"]
    p = b.run(*args)
    check("peak memory" in p.stdout and "reduction" in p.stdout and "grads = none" in p.stdout,
          "sweep prints the comparison table: %r" % p.stdout[:500])
    if "budget" in names:
        check("frontier" in p.stdout, "sweep with budgets prints the frontier")
    check(p.stderr.strip() == "", "sweep is quiet on stderr when it is not a terminal: %r" % p.stderr[:300])
    if p.returncode != 0:
        return
    header, rows = read_csv(w("sweep", "comparison.csv"))
    comp = [dict(zip(header, r)) for r in rows]
    expected_runs = len(sweep_list) + (2 if "budget" in names else 0)
    check(len(comp) == expected_runs, "comparison.csv has a row per run")
    summaries = {}
    for r in comp:
        d = w("sweep", r["run"])
        s = check_run_dir(d)
        summaries[r["run"]] = s
        check(r["complete"] == "1", "%s completed" % r["run"])
        check(r["grads_match_none"] == "1", "%s: gradients match none" % r["run"])
        if s:
            check(int(r["peak_bytes"]) == s["peak_bytes"], "%s: comparison.csv peak = summary" % r["run"])
            check(float(r["step_time_ms_median"]) == s["step_time_ms_median"], "%s: comparison.csv median = summary" % r["run"])
            check(int(r["recompute_flops"]) == s["flops"]["recompute"], "%s: recompute FLOPs" % r["run"])
    none = [r for r in comp if r["policy"] == "none"]
    if none:
        base = none[0]
        for r in comp:
            red = 100.0 * (1 - int(r["peak_bytes"]) / int(base["peak_bytes"]))
            check(abs(float(r["peak_reduction_pct"]) - red) < 1e-9, "%s: reduction vs none" % r["run"])
            if r["policy"] != "none":
                check(int(r["peak_bytes"]) < int(base["peak_bytes"]), "%s: uses less memory than none" % r["run"])

    # --- reading back: compare gives the same figures as the sweep
    cj = b.json("compare", w("sweep"), "--json")
    if cj is not None:
        check([x["run"] for x in cj["runs"]] == [r["run"] for r in comp], "compare lists the sweep's runs in order")
        for x, r in zip(cj["runs"], comp):
            for k in ("peak_bytes", "predicted_peak_bytes", "recompute_flops", "total_flops", "block_forwards"):
                check(x[k] == int(r[k]), "compare %s %s: %r != comparison.csv %r" % (x["run"], k, x[k], r[k]))
            for k in ("step_time_ms_median", "step_time_ms_spread"):
                check(x[k] == float(r[k]), "compare %s %s: %r != comparison.csv %r" % (x["run"], k, x[k], r[k]))
            for k in ("peak_reduction_pct", "step_overhead_pct"):
                check((x[k] is None and r[k] == "") or x[k] == float(r[k]), "compare %s %s" % (x["run"], k))
            check(x["grad_checksum"] == r["grad_checksum"], "compare %s grad_checksum" % x["run"])
            check(x["frontier"] == (r["frontier"] == "1"), "compare %s frontier" % x["run"])
    p = b.run("compare", w("sweep"))
    check("peak memory" in p.stdout, "compare prints the table")
    # compare of run directories one by one gives the same figures
    if comp:
        some = [w("sweep", r["run"]) for r in comp[:2]]
        cj2 = b.json("compare", *some, "--json")
        if cj2 is not None and cj is not None:
            for x, y in zip(cj2["runs"], cj["runs"][:2]):
                check(x["peak_bytes"] == y["peak_bytes"] and x["step_time_ms_median"] == y["step_time_ms_median"],
                      "compare of run dirs = compare of the sweep")

    # sweep --json prints what compare --json prints for it
    sj = b.json("sweep", "--model", "tiny", "--policies", "none", "--steps", "1", "--warmup", "0",
                "--out", w("sweep-json"), "--json")
    cj3 = b.json("compare", w("sweep-json"), "--json")
    if sj is not None and cj3 is not None:
        check(sj["runs"] == cj3["runs"], "sweep --json = compare --json of its directory")

    # --- export regenerates the same bytes
    first = w("sweep", comp[0]["run"]) if comp else None
    if first:
        copy = w("export-copy")
        shutil.copytree(first, copy)
        # Derived files removed, the others overwritten in place: the bytes must come back.
        for f in ("trace.json", "memory_timeline.csv"):
            os.remove(os.path.join(copy, f))
        ej = b.json("export", copy, "--format", "csv", "--json")
        check(ej is not None and len(ej.get("files", [])) == len(COLUMNS), "export --json lists the CSV files")
        b.json("export", copy, "--format", "chrome", "--json")
        for f in list(COLUMNS) + ["trace.json"]:
            with open(os.path.join(first, f), "rb") as x, open(os.path.join(copy, f), "rb") as y:
                check(x.read() == y.read(), "export regenerates %s byte for byte" % f)
        b.run("export", first, "--format", "chrome", "--out", w("elsewhere.json"))
        check(os.path.isfile(w("elsewhere.json")), "export --out writes there")

    # --- run --out, --json, refusing to overwrite, --force
    rj = b.json("run", "--model", "tiny", "--steps", "2", "--warmup", "1", "--out", w("run1"), "--json")
    if rj is not None:
        s = check_run_dir(w("run1"))
        if s:
            s.pop("files", None)
            check(s == rj, "summary.json = run --json")
    before = tree_digest(w("run1"))
    b.refuses(["run", "--model", "tiny", "--steps", "1", "--out", w("run1")], "run1", "--force")
    check(tree_digest(w("run1")) == before, "a refused run leaves the existing directory as it was")
    b.run("run", "--model", "tiny", "--steps", "1", "--warmup", "0", "--out", w("run1"), "--force")
    with open(w("run1", "summary.json")) as fh:
        check(json.load(fh)["steps"] == 1, "--force replaces the run directory")
    os.makedirs(w("precious"))
    with open(w("precious", "notes.txt"), "w") as fh:
        fh.write("mine")
    b.refuses(["run", "--model", "tiny", "--steps", "1", "--out", w("precious"), "--force"], "precious")
    check(os.listdir(w("precious")) == ["notes.txt"], "--force never replaces a directory that is not a run")
    leftovers = [f for f in os.listdir(work) if ".tmp-" in f or ".old-" in f]
    check(not leftovers, "temporary directories left behind: %r" % leftovers)

    # --- bad input
    b.refuses(["run", "--model", "no-such-model", "--steps", "1"], "no-such-model")
    b.refuses(["sweep", "--model", "tiny", "--policies", "none,no-such-policy", "--out", w("bad-sweep")], "no-such-policy")
    check(not os.path.exists(w("bad-sweep")), "a refused sweep writes nothing")
    b.refuses(["run", "--model", "tiny", "--policy", "none:bogus=1", "--steps", "1"], "bogus")
    if "revolve" in names:
        b.refuses(["run", "--model", "tiny", "--policy", "revolve:snapshots=many", "--steps", "1"], "snapshots", "many")
    if "uniform" in names:
        b.refuses(["sweep", "--model", "tiny", "--policies", "none,uniform:segments=0"], "segments")
    b.refuses(["run", "--model", "tiny", "--steps", "abc"], "--steps")
    b.refuses(["sweep", "--model", "tiny", "--policies", "none", "--memory-budgets", "2XB"], "memory-budgets")
    b.refuses(["sweep", "--model", "tiny", "--policies", "none", "--memory-budgets", "2MiB", "--budget-policy", "selective"],
              "budget-policy", "'selective'", "budget, optimal")
    if "optimal" in names:
        p = b.run("sweep", "--model", "tiny", "--policies", "none", "--memory-budgets", "2MiB", "--budget-policy", "optimal",
                  "--steps", "1", "--warmup", "0")
        check("optimal@2MiB" in p.stdout, "sweep --budget-policy optimal runs optimal at the budget: %r" % p.stdout[:400])
    b.refuses(["sweep", "--model", "tiny", "--policies", "segments=2"], "segments=2")
    b.refuses(["run", "--model", "tiny", "--device", "tpu"], "tpu")
    b.refuses(["compare", w("does-not-exist")], "does-not-exist")
    b.refuses(["export", w("does-not-exist"), "--format", "csv"], "does-not-exist")
    b.refuses(["export", w("run1"), "--format", "svg"], "--format")
    os.makedirs(w("empty-dir"))
    b.refuses(["compare", w("empty-dir")], "not a run directory")

    def corrupt(name, fn, *words):
        d = w("corrupt-" + name)
        shutil.copytree(w("run1"), d)
        fn(d)
        before = tree_digest(d)
        b.refuses(["compare", d], *words)
        b.refuses(["export", d, "--format", "csv"], *words)
        b.refuses(["export", d, "--format", "chrome"], *words)
        check(tree_digest(d) == before, "export of a corrupt run (%s) overwrote something" % name)

    def cut(f, keep):
        def fn(d):
            with open(os.path.join(d, f), "rb") as fh:
                data = fh.read()
            with open(os.path.join(d, f), "wb") as fh:
                fh.write(keep(data))
        return fn

    corrupt("summary-garbage", cut("summary.json", lambda x: b"\x00garbage{"), "summary.json")
    corrupt("summary-truncated", cut("summary.json", lambda x: x[: len(x) // 2]), "summary.json")
    corrupt("events-midrow", cut("memory_events.csv", lambda x: x[:-5]), "memory_events.csv")
    corrupt("ops-atrow", cut("ops.csv", lambda x: x[: x.rfind(b"\n", 0, len(x) - 1) + 1]), "ops.csv")
    corrupt("loss-missing", lambda d: os.remove(os.path.join(d, "loss.csv")), "loss.csv")
    corrupt("schedule-truncated", cut("schedule.json", lambda x: x[: len(x) // 3]), "schedule.json")
    corrupt("timeline-edited", cut("memory_timeline.csv", lambda x: x.replace(b"\n", b"\n9", 2).replace(b"\n9", b"\n", 1)),
            "memory_timeline.csv")

    # Validated against the schema and against each other (docs/trace-format.md "Reading").
    def edit_json(f, fn):
        def edit(d):
            with open(os.path.join(d, f)) as fh:
                j = json.load(fh)
            fn(j)
            with open(os.path.join(d, f), "w") as fh:
                json.dump(j, fh)
        return edit

    def set_cell(f, row, col, value):
        def edit(d):
            with open(os.path.join(d, f), newline="") as fh:
                rows = list(csv.reader(fh))
            rows[row + 1][rows[0].index(col)] = value
            with open(os.path.join(d, f), "w", newline="") as fh:
                csv.writer(fh, lineterminator="\n").writerows(rows)
        return edit

    def cut_rows(f, keep):
        def edit(d):
            with open(os.path.join(d, f), "rb") as fh:
                lines = fh.read().split(b"\n")
            with open(os.path.join(d, f), "wb") as fh:
                fh.write(b"\n".join(lines[:keep + 1]) + b"\n")
        return edit

    def both(*edits):
        def edit(d):
            for e in edits:
                e(d)
        return edit

    def set_block(j):
        j["actions"][1]["block"] = 99

    corrupt("schedule-block99", edit_json("schedule.json", set_block), "schedule.json", "block 99")
    corrupt("layers-5", edit_json("summary.json", lambda j: j["model"].update(layers=5)), "summary.json", "model.layers is 5")
    corrupt("layers-1e9", edit_json("summary.json", lambda j: j["model"].update(layers=10**9)), "summary.json", "layers")
    corrupt("block-past-layers", set_cell("ops.csv", 3, "block", "4"), "ops.csv line 5", "'block'", "model.layers is 4")
    corrupt("action-text", set_cell("schedule.csv", 0, "action", "jump"), "schedule.csv line 2", "'action'", "jump")
    corrupt("decision-nul", set_cell("ledger.csv", 0, "decision", "kept\0"), "ledger.csv line 2", "'decision'", "\\x00")
    corrupt("no-files", edit_json("summary.json", lambda j: j.pop("files")), "summary.json", "'files'")
    corrupt("ops-cut-counted", both(cut_rows("ops.csv", 19),
                                    edit_json("summary.json", lambda j: j["files"]["ops.csv"].update(rows=19))),
            "ops.csv", "flops")
    corrupt("newer-version", edit_json("summary.json", lambda j: j.update(format_version=9)),
            "summary.json", "format version 9 is newer than this RematLab reads (6); upgrade RematLab")
    corrupt("time-min", set_cell("ops.csv", 0, "start_ns", str(-2**63)), "ops.csv line 2", "'start_ns'", str(-2**63))
    corrupt("schedule-time-min", set_cell("schedule.csv", 0, "end_ns", str(-2**63)), "schedule.csv line 2", "'end_ns'")
    corrupt("delta-max", set_cell("memory_events.csv", 0, "delta_bytes", str(2**63 - 1)),
            "memory_events.csv line 2", "'delta_bytes'", str(2**63 - 1))
    corrupt("table-is-dir", both(lambda d: os.remove(os.path.join(d, "ledger.csv")),
                                 lambda d: os.mkdir(os.path.join(d, "ledger.csv"))), "ledger.csv", "is a directory")

    # A FIFO in place of a file: refused at once, never waited on.
    for f in ("summary.json", "ops.csv"):
        d = w("corrupt-fifo-" + f)
        shutil.copytree(w("run1"), d)
        os.remove(os.path.join(d, f))
        os.mkfifo(os.path.join(d, f))
        for args in (["compare", d], ["export", d, "--format", "chrome"]):
            try:
                p = subprocess.run([b.binary] + args, capture_output=True, text=True, env=b.env, timeout=60)
            except subprocess.TimeoutExpired:
                check(False, "`%s` hangs on a FIFO as %s" % (" ".join(args), f))
                os.close(os.open(os.path.join(d, f), os.O_RDWR))
                continue
            check(p.returncode != 0 and f in p.stderr and "FIFO" in p.stderr,
                  "`%s` with a FIFO as %s: %d %r" % (" ".join(args), f, p.returncode, p.stderr.strip()))

    # sweep.json is checked too.
    sweep9 = w("sweep-v9")
    shutil.copytree(w("sweep-json"), sweep9)
    edit_json("sweep.json", lambda j: j.update(format_version=9))(sweep9)
    b.refuses(["compare", sweep9], "sweep.json", "format version 9 is newer than this RematLab reads (1); upgrade RematLab")
    edit_json("sweep.json", lambda j: j["runs"][0].update(dir="../run1"))(sweep9)
    edit_json("sweep.json", lambda j: j.update(format_version=1))(sweep9)
    b.refuses(["compare", sweep9], "sweep.json", "'dir'", "inside the sweep directory")

    # The committed fixtures of every format version still read (tests/data/).
    data = os.path.join(source, "tests", "data")
    fixtures = sorted(os.path.join(data, f) for f in os.listdir(data) if f.startswith(("run-v", "sweep-v", "ranks-v")))
    check(bool(fixtures), "no run or sweep fixtures in tests/data")
    cf = b.json("compare", *fixtures, "--json")
    check(cf is not None and len(cf["runs"]) >= len(fixtures), "compare reads every fixture of tests/data")

    # A path without write permission.
    if os.geteuid() == 0:
        target = "/sys/rematlab-e2e-%d" % os.getpid()  # not writable even by root
    else:
        ro = w("read-only")
        os.makedirs(ro)
        os.chmod(ro, 0o555)
        target = os.path.join(ro, "run")
    b.refuses(["run", "--model", "tiny", "--steps", "1", "--out", target], target)
    check(not os.path.exists(target), "nothing written at a path without permission")
    b.refuses(["sweep", "--model", "tiny", "--policies", "none", "--out", target], target)
    b.refuses(["export", w("run1"), "--format", "csv", "--out", target], target)


if __name__ == "__main__":
    sys.exit(main())
