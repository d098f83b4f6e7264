"""What the PyTorch benchmarks share (recorder_overhead.py, predict_overhead.py): their command
line and one CPU AdamW step of a test model of tests/torch_models/models.py."""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch_models"))
import torch  # noqa: E402
import models  # noqa: E402


def parse_args(layers, repeats):
    """--model gpt2|llama|cross, --layers, --hidden, --seq, --batch, --repeats, --threads."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["gpt2", "llama", "cross"], default="gpt2")
    ap.add_argument("--layers", type=int, default=layers)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=repeats)
    ap.add_argument("--threads", type=int, default=1)
    return ap.parse_args()


def make_step(a):
    """(model, optimizer, step): step() runs the forward, the backward and AdamW's step, and
    returns the loss."""
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = models.by_name(a.model, hidden=a.hidden, layers=a.layers, positions=a.seq)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x, y = models.batch(256, batch=a.batch, seq=a.seq)

    def step():
        loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return model, opt, step
