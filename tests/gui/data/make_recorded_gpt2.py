"""Writes tests/gui/data/recorded-gpt2: one AdamW step of a 2-block GPT-2 of tests/torch_models
recorded by python/rematlab (no profiler), the recording the Analysis page's test opens.
Run from the repository root: /usr/bin/python3 tests/gui/data/make_recorded_gpt2.py OUT_DIR"""
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
with rematlab.record(sys.argv[1], model=model, optimizer=opt, profile=False) as rec:
    loss = model(x, y)
    loss.backward()
    opt.step()
    rec.loss(loss)
