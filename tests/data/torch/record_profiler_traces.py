#!/usr/bin/python3
"""Records the real profiler traces of tests/data/torch with the installed torch (run it with
Debian's /usr/bin/python3 and python3-torch): one AdamW step of a small MLP under
torch.profiler.profile and one SGD step under torch.autograd.profiler.profile, each written by
torch's own export_chrome_trace. torch 1.13 without Kineto (Debian 12's CPU build) writes both
in the legacy layout: a bare array of "ph": "X" events of CPU functions, without a category,
times in whole microseconds, no memory events. The traces differ in their times from run to
run; the tests read what the committed ones hold, not fixed counts.

  record_profiler_traces.py [DIR]     writes torch-VERSION-profiler.json and
                                      torch-VERSION-autograd-profiler.json into DIR (default: here)
"""
import os
import sys

import torch


def step(opt_kind):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    opt = (torch.optim.AdamW if opt_kind == "adamw" else torch.optim.SGD)(model.parameters(), lr=0.1)
    x, y = torch.randn(4, 8), torch.randn(4, 4)

    def run():
        with torch.autograd.profiler.record_function("train_step"):
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
    return run


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    version = torch.__version__.split("+")[0].split("a")[0]
    run = step("adamw")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True,
                                record_shapes=True, with_flops=True) as prof:
        run()
    prof.export_chrome_trace(os.path.join(out, "torch-%s-profiler.json" % version))
    run = step("sgd")
    with torch.autograd.profiler.profile(profile_memory=True) as prof:
        run()
    prof.export_chrome_trace(os.path.join(out, "torch-%s-autograd-profiler.json" % version))


if __name__ == "__main__":
    main()
