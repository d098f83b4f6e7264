"""What rematlab.predict costs on top of the step: one CPU AdamW step of a test model
(tests/torch_models/models.py: gpt2, llama or cross, the decoder with keyword tensors and a
second stack), plain and inside rematlab.predict of four plans (with the profiler and
profile=False), interleaved; the median of each, and the predictor alone (predict_run of the
four plans on a recording). Needs the compiled predictor: run it with a virtual environment's
python where the package is installed (docs/own-model.md), or build it in place first
(cd python && python3 setup.py build_ext --inplace).

  /usr/bin/python3 bench/predict_overhead.py [--model gpt2] [--layers 24] [--repeats 5]
"""
import os
import shutil
import statistics
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
try:
    import rematlab  # an installed package first
except ImportError:
    sys.path.insert(0, os.path.join(here, "..", "python"))
    import rematlab
import torch  # noqa: E402
from torch_step import make_step, parse_args  # noqa: E402

PLANS = ["per-block", "every:2", "segments:4", "sqrt"]
a = parse_args(layers=24, repeats=5)
model, opt, step = make_step(a)
work = tempfile.mkdtemp(prefix="predict-bench-")


def timed(kind):
    t = time.perf_counter()
    if kind == "plain":
        step()
    else:
        rematlab.predict(model, step, plan=PLANS, optimizer=opt, profile=kind == "predict")
    return time.perf_counter() - t


for _ in range(2):
    step()  # warm up
times = {"plain": [], "predict": [], "predict-no-profiler": []}
for i in range(a.repeats):
    for k in times:  # interleaved, so drift in the machine's load hits each alike
        times[k].append(timed(k))
rec = os.path.join(work, "rec")
with rematlab.record(rec, model=model, optimizer=opt):
    step()
alone = []
for _ in range(a.repeats):
    t = time.perf_counter()
    rematlab.predict_run(rec, PLANS)
    alone.append(time.perf_counter() - t)
base = statistics.median(times["plain"])
print("%s step: layers %d, hidden %d, seq %d, batch %d, %d thread(s), torch %s, %d repeats; plans %s"
      % (a.model, a.layers, a.hidden, a.seq, a.batch, a.threads, torch.__version__, a.repeats, " ".join(PLANS)))
for k, v in times.items():
    m = statistics.median(v)
    print("%-20s median %8.1f ms  (min %8.1f)  on top of the step %8.1f ms" % (k, m * 1e3, min(v) * 1e3,
                                                                            (m - base) * 1e3))
print("%-20s median %8.1f ms  (the predictor alone, four plans)" % ("predict_run", statistics.median(alone) * 1e3))
shutil.rmtree(work, ignore_errors=True)
