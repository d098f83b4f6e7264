# PyTorch SDPA, causal, bf16, head dim 64: forward and forward + backward at the two shapes the
# flash attention target names, timed the way ../shared/anchors/torch_compile_anchor.py times
# them (CUDA events around each call, warmup, median) and with the same FLOP count
# (4·B·H·T²·D/2 forward for causal, 3.5× that for forward + backward). One JSON line per shape,
# the same fields as cuda_bench's flash_attention line.
# Usage: python3 sdpa_anchor.py [--quick]
import json, statistics, sys

import torch
import torch.nn.functional as F

SHAPES = ((2, 12, 4096, 64), (1, 16, 16384, 64))


def ev_time(fn, warm, reps):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def main():
    quick = "--quick" in sys.argv[1:]
    warm, reps = (2, 3) if quick else (3, 10)
    print("torch", torch.__version__, torch.cuda.get_device_name(0), flush=True)
    for (B, H, T, D) in SHAPES:
        try:
            q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
            def fb():
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                o.backward(torch.ones_like(o))
            ms_f = ev_time(fwd, warm, reps)  # with autograd on, as the anchors file measured it
            ms_fb = ev_time(fb, warm, reps)
            flops = 4 * B * H * T * T * D / 2  # causal
            print(json.dumps(dict(figure="sdpa", B=B, H=H, T=T, D=D, causal=True, dtype="bf16",
                                  fwd_ms=ms_f, fwd_tflops=flops / ms_f / 1e9,
                                  fwdbwd_ms=ms_fb, fwdbwd_tflops=3.5 * flops / ms_fb / 1e9)), flush=True)
            del q, k, v
            torch.cuda.empty_cache()
        except Exception as e:  # keep going with the next shape
            print(json.dumps(dict(figure="error", what=f"sdpa B={B} H={H} T={T}", error=repr(e)[:300])), flush=True)


if __name__ == "__main__":
    main()
