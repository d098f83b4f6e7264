"""Writes tests/data/recorded-v2: one AdamW step of a 2-block GPT-2 of tests/torch_models recorded
by python/rematlab with the profiler (so with op classes, op_outputs.csv and the forward's ops),
the recording the recorded_run fuzz target starts from.
Run from the repository root: /usr/bin/python3 tests/data/make_recorded_run.py tests/data/recorded-v2"""
import os
import sys

import torch

sys.path.insert(0, "python")
sys.path.insert(0, os.path.join("tests", "torch_models"))
import models  # noqa: E402
import rematlab  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
model = models.Gpt2(vocab=64, hidden=32, heads=4, layers=2, positions=8)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = models.batch(64, batch=2, seq=8)
with rematlab.record(sys.argv[1], model=model, optimizer=opt, profile=True) as rec:
    loss = model(x, y)
    loss.backward()
    opt.step()
    rec.loss(loss)
