#!/usr/bin/python3
"""PyTorch's GELU forward + backward on gpt2-124m's MLP activation at B1 T128 ([128, 3072]),
the same shape and thread count as build/bin/cpu_ops_bench's "gelu ... fwd+bwd" lines.

Usage: bench/gelu_torch.py [reps] [threads]. Prints the median ms of reps calls of
aten.gelu + aten.gelu_backward (tanh approximation and exact erf), fp32 and bf16."""
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its threads
import time  # noqa: E402

import torch  # noqa: E402


def median_ms(reps, fn):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(5)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, medians of {reps} calls")
    for dt in (torch.float32, torch.bfloat16):
        x = (torch.rand(128, 3072, generator=g) * 6 - 3).to(dt)
        dy = (torch.rand(128, 3072, generator=g) * 6 - 3).to(dt)
        for approx in ("tanh", "none"):
            def step():
                y = torch.ops.aten.gelu(x, approximate=approx)
                dx = torch.ops.aten.gelu_backward(dy, x, approximate=approx)
                return y, dx
            step()
            name = "tanh" if approx == "tanh" else "erf"
            print(f"| torch gelu {name} fwd+bwd [128x3072] {str(dt).split('.')[-1]} | "
                  f"{median_ms(reps, step):.3f} ms |")


if __name__ == "__main__":
    with torch.no_grad():
        main()
