"""The recorder's overhead: one CPU AdamW step of a test model (tests/torch_models/models.py:
gpt2, the GPT-2-style one; llama; cross, the decoder whose blocks take keyword tensors from a
second stack) with and without rematlab.record, as the ratio of the median
step times over interleaved repeats (with the profiler, and with profile=False).

  /usr/bin/python3 bench/recorder_overhead.py [--model gpt2] [--repeats 15] [--layers 4] [--hidden 64] [--seq 64]
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "python"))
sys.path.insert(0, os.path.join(here, "..", "tests", "torch_models"))
import torch  # noqa: E402
import rematlab  # noqa: E402
import models  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--model", choices=["gpt2", "llama", "cross"], default="gpt2")
ap.add_argument("--repeats", type=int, default=15)
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--hidden", type=int, default=64)
ap.add_argument("--seq", type=int, default=64)
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--threads", type=int, default=1)
a = ap.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
if a.model == "gpt2":
    model = models.Gpt2(vocab=256, hidden=a.hidden, heads=4, layers=a.layers, positions=a.seq)
elif a.model == "llama":
    model = models.Llama(vocab=256, hidden=a.hidden, heads=4, kv_heads=2, ffn=2 * a.hidden, layers=a.layers)
else:
    model = models.CrossDecoder(vocab=256, hidden=a.hidden, heads=4, layers=a.layers)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x, y = models.batch(256, batch=a.batch, seq=a.seq)
work = tempfile.mkdtemp(prefix="recorder-bench-")


def step():
    loss = model(x, y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


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
