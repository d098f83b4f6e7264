#!/usr/bin/env python3
"""Writes the torch import fixtures from the formats themselves, with the standard library only
(pickle of plain dicts and lists, json): torch.cuda.memory._dump_snapshot pickles in the torch
1.13 and 2.x layouts, a torch.profiler Chrome trace, files that must be refused, and next to
each accepted one NAME.expected.json with the counts and bytes an importer must find.

  make_fixtures.py [DIR]                 the small fixtures (committed) into DIR (default: here)
  make_fixtures.py --big N FILE          a 2.x snapshot of about N trace entries (tests, bench)
"""
import json
import os
import pickle
import random
import sys

SEG_SIZE = 1 << 20
SEG_BASE = 0x7F0000000000
MARKER = "/tmp/rematlab-pickle-must-not-run"


def frame_pool():
    fwd = [[{"filename": "/src/train/model.py", "line": 100 + i, "name": "layer%d_forward" % i},
            {"filename": "/src/train/loop.py", "line": 42, "name": "train_step"}] for i in range(8)]
    bwd = [[{"filename": "/usr/lib/python3/dist-packages/torch/autograd/__init__.py", "line": 200,
             "name": "backward"},
            {"filename": "/src/train/loop.py", "line": 48, "name": "train_step"}]]
    return fwd, bwd


def simulate(n_entries, layout, seed, share_frames=True):
    """The snapshot dict and what an importer must find (docs/trace-format.md, Imported traces)."""
    rng = random.Random(seed)
    fwd, bwd = frame_pool()
    timed = layout == "2"
    segments = [{"base": SEG_BASE, "next": 0, "blocks": []}]  # segment 0 exists before the trace
    entries = []
    t_us = 1_000_000
    live = {}         # addr -> (size, backward)
    events = 0        # memory events the importer writes
    baseline = 0      # ... of them allocated before the trace
    alloc_bytes = 0   # sum of +delta
    cur = 0           # live bytes
    reserved = SEG_SIZE

    def frames_of(kind):
        f = rng.choice(bwd if kind else fwd)
        return f if share_frames else [dict(x) for x in f]

    def entry(**kw):
        nonlocal t_us
        t_us += rng.randint(1, 50)
        kw.setdefault("stream", 0)
        if timed:
            kw["time_us"] = t_us
        entries.append(kw)

    def place(size):
        nonlocal reserved
        seg = segments[-1]
        if seg["next"] + size > SEG_SIZE:
            seg = {"base": SEG_BASE + len(segments) * SEG_SIZE, "next": 0, "blocks": []}
            segments.append(seg)
            entry(action="segment_alloc", addr=seg["base"], size=SEG_SIZE)
            reserved += SEG_SIZE
        addr = seg["base"] + seg["next"]
        seg["next"] += size
        seg["blocks"].append(addr)
        return addr

    # Three blocks allocated before the trace began (the ring buffer lost their alloc), freed
    # in it; two more alive at the end that it never mentions.
    pre = [place(4096 * (k + 1)) for k in range(5)]
    sizes = {a: 4096 * (k + 1) for k, a in enumerate(pre)}
    for a in pre:
        cur += sizes[a]
        alloc_bytes += sizes[a]
        baseline += 1
        events += 1
    start_live = cur
    peak = cur
    pre_freed = pre[:3]
    pre_live = {a: sizes[a] for a in pre}
    block_frames = {a: frames_of(False) for a in pre[3:]}

    while len(entries) < n_entries:
        r = rng.random()
        if pre_freed and r < 0.02:
            a = pre_freed.pop()
            entry(action="free_requested", addr=a, size=sizes[a])
            entry(action="free_completed", addr=a, size=sizes[a])
            cur -= sizes[a]
            del pre_live[a]
            events += 1
        elif live and (r < 0.45 or len(live) > 200):
            a = rng.choice(sorted(live))
            size, _ = live.pop(a)
            entry(action="free_requested", addr=a, size=size)
            entry(action="free_completed", addr=a, size=size)
            cur -= size
            events += 1
        else:
            size = 512 * rng.randint(1, 64)
            back = rng.random() < 0.3
            a = place(size)
            f = frames_of(back)
            entry(action="alloc", addr=a, size=size, frames=f)
            live[a] = (size, back)
            block_frames[a] = f
            sizes[a] = size
            cur += size
            alloc_bytes += size
            events += 1
            peak = max(peak, cur)
        if rng.random() < 0.001:
            entry(action="snapshot", addr=0, size=0)
    # An allocation of 0 bytes is no memory event.
    entry(action="alloc", addr=SEG_BASE + 7, size=0, frames=[])
    entry(action="free_requested", addr=SEG_BASE + 7, size=0)

    alive_end = dict(live)
    for a, size in pre_live.items():
        alive_end[a] = (size, False)
    segs = []
    for s in segments:
        blocks = []
        used = 0
        for a in s["blocks"]:
            size = sizes[a]
            state = "active_allocated" if a in alive_end else "inactive"
            blocks.append((a, size, state))
            used += size
        blocks.append((s["base"] + used, SEG_SIZE - used, "inactive"))
        out = []
        for a, size, state in blocks:
            if size == 0:
                continue
            f = block_frames.get(a, [])
            if layout == "2":
                out.append({"address": a, "size": size, "requested_size": size, "state": state, "frames": f})
            else:
                out.append({"size": size, "state": state,
                            "history": [{"addr": a, "real_size": size, "frames": f}] if state != "inactive" else []})
        seg = {"address": s["base"], "total_size": SEG_SIZE, "stream": 0, "segment_type": "large",
               "allocated_size": sum(sizes[a] for a in s["blocks"] if a in alive_end),
               "active_size": sum(sizes[a] for a in s["blocks"] if a in alive_end), "blocks": out}
        if layout == "2":
            seg["device"] = 0
            seg["requested_size"] = seg["allocated_size"]
            seg["segment_pool_id"] = (0, 0)
            seg["is_expandable"] = False
        segs.append(seg)
    snapshot = {"segments": segs, "device_traces": [entries]}
    if layout == "2":
        snapshot["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": None}
    expected = {
        "source": "pytorch-snapshot",
        "memory_events": events,
        "baseline_events": baseline,
        "allocated_bytes": alloc_bytes,
        "live_bytes_at_end": cur,
        "peak_bytes": peak,
        "reserved_bytes_at_end": reserved,
        "reserved_bytes_at_start": SEG_SIZE,
        "trace_entries": len(entries),
        "duration_ns": (entries[-1]["time_us"] - min(e["time_us"] for e in entries)) * 1000 if timed else None,
        "a_name": "model.py:100:layer0_forward < loop.py:42:train_step",
    }
    assert cur == sum(v[0] for v in alive_end.values()), "bookkeeping"
    return snapshot, expected


class RunsCode:
    """Pickles as a call of os.system: what a hostile file holds. Only pickled, never loaded."""

    def __reduce__(self):
        return (os.system, ("touch " + MARKER,))


def profiler_trace():
    """A torch.profiler export_chrome_trace: a forward op, its kernel, a backward op through the
    autograd engine, an optimizer step, runtime calls and [memory] instants."""
    ev = []
    pid, tid = 1234, 1234
    ts = 1_700_000_000_000.0

    def op(name, cat, start, dur, t=tid, p=pid, **args):
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": p, "tid": t, "ts": ts + start, "dur": dur,
                   "args": args})

    def mem(start, addr, nbytes, total):
        ev.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": pid, "tid": tid,
                   "ts": ts + start, "args": {"Device Type": 1, "Device Id": 0, "Addr": addr, "Bytes": nbytes,
                                              "Total Allocated": total, "Total Reserved": 1 << 21}})

    op("ProfilerStep#1", "user_annotation", 0, 100)
    op("aten::linear", "cpu_op", 1, 20, **{"External id": 1})
    op("aten::mm", "cpu_op", 2, 10, **{"External id": 2})
    mem(3, 0x7F00, 4096, 4096)
    op("cudaLaunchKernel", "cuda_runtime", 4, 2, correlation=10, **{"External id": 2})
    op("ampere_sgemm_64x32", "kernel", 8, 5, t=7, p=0, correlation=10, **{"External id": 2})
    op("autograd::engine::evaluate_function: MmBackward0", "cpu_op", 30, 20, **{"External id": 3})
    op("MmBackward0", "cpu_op", 31, 15, **{"External id": 4})
    mem(32, 0x8F00, 8192, 12288)
    op("cudaLaunchKernel", "cuda_runtime", 33, 2, correlation=11, **{"External id": 4})
    op("ampere_sgemm_128x64", "kernel", 36, 6, t=7, p=0, correlation=11, **{"External id": 4})
    op("Memcpy DtoH (Device -> Pageable)", "gpu_memcpy", 43, 1, t=8, p=0, correlation=12)
    mem(46, 0x7F00, -4096, 8192)
    op("Optimizer.step#SGD.step", "cpu_op", 60, 20, **{"External id": 5})
    op("aten::add_", "cpu_op", 61, 5, **{"External id": 6})
    mem(62, 0x9F00, 1024, 9216)
    mem(70, 0x1000, -512, 8704)   # allocated before the profile began
    ev.append({"ph": "f", "id": 10, "pid": 0, "tid": 7, "ts": ts + 8, "cat": "ac2g", "name": "ac2g"})
    trace = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}],
             "traceEvents": ev, "traceName": "fixture"}
    expected = {"source": "pytorch-profiler", "ops": 11, "memory_events": 6, "baseline_events": 1,
                "phases": {"aten::linear": "forward", "aten::mm": "forward", "ampere_sgemm_64x32": "forward",
                           "MmBackward0": "backward", "ampere_sgemm_128x64": "backward",
                           "aten::add_": "optimizer"},
                "peak_bytes": 512 + 4096 + 8192, "duration_ns": 80000}
    return trace, expected


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def small(out):
    os.makedirs(out, exist_ok=True)
    for name, layout, proto in (("snapshot-torch2", "2", 4), ("snapshot-torch113", "113", 2)):
        snap, exp = simulate(300, layout, seed=7)
        write(os.path.join(out, name + ".pickle"), pickle.dumps(snap, protocol=proto))
        write(os.path.join(out, name + ".expected.json"), (json.dumps(exp, indent=1) + "\n").encode())
    # A small one for truncation at every byte (tests/unit/pickle_reader_test.cpp).
    snap, _ = simulate(30, "2", seed=5)
    write(os.path.join(out, "snapshot-small.pickle"), pickle.dumps(snap, protocol=4))
    trace, exp = profiler_trace()
    write(os.path.join(out, "profiler-trace.json"), (json.dumps(trace) + "\n").encode())
    write(os.path.join(out, "profiler-trace.expected.json"), (json.dumps(exp, indent=1) + "\n").encode())
    # Refused: code (GLOBAL + REDUCE at protocol 2, STACK_GLOBAL + REDUCE at 4), a snapshot of a
    # layout no torch wrote, a pickle that is no snapshot, a JSON that is no profiler trace.
    write(os.path.join(out, "runs-code-global.pickle"), pickle.dumps({"segments": [RunsCode()]}, protocol=2))
    write(os.path.join(out, "runs-code-stack-global.pickle"), pickle.dumps([RunsCode()], protocol=4))
    snap, _ = simulate(20, "2", seed=3)
    snap["device_traces"][0][1]["action"] = "teleport"
    write(os.path.join(out, "unknown-layout.pickle"), pickle.dumps(snap, protocol=4))
    write(os.path.join(out, "not-a-snapshot.pickle"), pickle.dumps({"weights": [1.0, 2.0]}, protocol=4))
    write(os.path.join(out, "not-a-profiler-trace.json"), b'{"model": "gpt2", "layers": 12}\n')


def main(argv):
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if argv and argv[0].startswith("-") and not (argv[0] == "--big" and len(argv) == 3):
        print("make_fixtures.py: unknown or incomplete option %r (see --help)" % argv[0], file=sys.stderr)
        return 2
    if len(argv) >= 3 and argv[0] == "--big":
        snap, exp = simulate(int(argv[1]), "2", seed=11)
        with open(argv[2], "wb") as f:
            pickle.dump(snap, f, protocol=4)
        with open(argv[2] + ".expected.json", "w") as f:
            json.dump(exp, f, indent=1)
        return 0
    small(argv[0] if argv else os.path.dirname(os.path.abspath(__file__)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
