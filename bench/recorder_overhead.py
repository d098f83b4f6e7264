"""The recorder's overhead: one CPU AdamW step of a test model (tests/torch_models/models.py:
gpt2, the GPT-2-style one; llama; cross, the decoder whose blocks take keyword tensors from a
second stack) with and without rematlab.record, as the ratio of the median
step times over interleaved repeats (with the profiler, and with profile=False).

  /usr/bin/python3 bench/recorder_overhead.py [--model gpt2] [--repeats 15] [--layers 4] [--hidden 64] [--seq 64]
"""
import os
import shutil
import statistics
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "python"))
sys.path.insert(0, here)
import torch  # noqa: E402
import rematlab  # noqa: E402
from torch_step import make_step, parse_args  # noqa: E402

a = parse_args(layers=4, repeats=15)
model, opt, step = make_step(a)
work = tempfile.mkdtemp(prefix="recorder-bench-")


def timed(kind, i):
    out = os.path.join(work, "r%d" % i)
    t = time.perf_counter()
    if kind == "plain":
        step()
    else:
        with rematlab.record(out, model=model, optimizer=opt, profile=kind == "record"):
            step()
    dt = time.perf_counter() - t
    shutil.rmtree(out, ignore_errors=True)
    return dt


for _ in range(3):
    step()  # warm up
times = {"plain": [], "record": [], "record-no-profiler": []}
for i in range(a.repeats):
    for k in times:  # interleaved, so drift in the machine's load hits each alike
        times[k].append(timed(k, i))
base = statistics.median(times["plain"])
print("%s step: layers %d, hidden %d, seq %d, batch %d, %d thread(s), torch %s, %d repeats"
      % (a.model, a.layers, a.hidden, a.seq, a.batch, a.threads, torch.__version__, a.repeats))
for k, v in times.items():
    m = statistics.median(v)
    print("%-20s median %8.2f ms  (min %8.2f)  ratio to plain %.2f" % (k, m * 1e3, min(v) * 1e3, m / base))
shutil.rmtree(work, ignore_errors=True)
