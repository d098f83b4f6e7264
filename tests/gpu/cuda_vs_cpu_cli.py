#!/usr/bin/env python3
# End-to-end check of the CUDA backend through the real executor, on a GPU machine:
#   python3 tests/gpu/cuda_vs_cpu_cli.py build/bin/rematlab-batch
# Small models: losses on cuda against cpu (bf16 within 1e-2, fp32 within 1e-4 relative), two
# cuda runs bit-identical (losses and gradient checksum), measured peak == predicted peak, under
# several policies (offload, selective, uniform, revolve, poison). Large presets: step time,
# tokens/s and memory on cuda.
import json, os, subprocess, sys, time
B = sys.argv[1] if len(sys.argv) > 1 else "build/bin/rematlab-batch"

def run(args, device, steps=3):
    cmd = [B, "run", "--device", device, "--steps", str(steps), "--json"] + args
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        return None, (p.stderr.strip() or p.stdout.strip())[-600:], time.time() - t
    try:
        return json.loads(p.stdout), "", time.time() - t
    except Exception as e:
        return None, "bad json: %s %s" % (e, p.stdout[-300:]), time.time() - t

small = [
    ["-m", "tiny"],
    ["-m", "tiny", "--attention", "flash"],
    ["-m", "tiny", "--dtype", "fp32"],
    ["-m", "tiny", "--dtype", "fp32", "--attention", "flash"],
    ["-m", "llama-tiny"],
    ["-m", "llama-tiny", "--attention", "flash", "--dropout", "0.1"],
    ["-m", "llama-tiny", "--dtype", "fp32"],
    ["-m", "small", "-p", "offload"],
    ["-m", "small", "-p", "offload:what=checkpoints", "--attention", "flash"],
    ["-m", "tiny", "-p", "selective"],
    ["-m", "tiny", "-p", "uniform"],
    ["-m", "tiny", "-p", "revolve"],
    ["-m", "tiny", "--poison"],
]
fails = 0
for a in small:
    c, ec, tc = run(a, "cpu")
    g, eg, tg = run(a, "cuda")
    g2, eg2, _ = run(a, "cuda")
    name = " ".join(a)
    if not c or not g or not g2:
        print("FAIL %-55s cpu:%s cuda:%s cuda2:%s" % (name, ec[-300:], eg[-300:], eg2[-300:]))
        fails += 1
        continue
    lc, lg = c["loss"], g["loss"]
    rel = max(abs(x - y) / max(abs(y), 1e-9) for x, y in zip(lg, lc))
    same = g["loss"] == g2["loss"] and g["grad_checksum"] == g2["grad_checksum"]
    tolr = 1e-2 if g["model"]["dtype"] == "bf16" else 1e-4
    ok = rel <= tolr and same and g["peak_bytes"] == g["predicted_peak_bytes"]
    fails += 0 if ok else 1
    print("%s %-55s cpu %s cuda %s rel %.2e det %s peak %d pred %d reserved %d ms %.2f prof_ns %d" % (
        "ok  " if ok else "FAIL", name, ["%.5f" % x for x in lc], ["%.5f" % x for x in lg], rel,
        same, g["peak_bytes"], g["predicted_peak_bytes"], g["peak_reserved_bytes"],
        g["step_time_ms_median"], g["profiler_overhead_ns"]))
    sys.stdout.flush()
big = [
    ["-m", "gpt2-124m"],
    ["-m", "gpt2-124m", "--no-profile"],
    ["-m", "gpt2-124m", "--attention", "naive", "--no-profile"],
    ["-m", "gpt2-124m", "-p", "offload", "--no-profile"],
    ["-m", "gpt2-350m", "--no-profile"],
    ["-m", "llama-1b", "--no-profile"],
]
for a in big:
    g, eg, tg = run(a, "cuda", steps=4)
    name = " ".join(a)
    if not g:
        print("FAIL %-45s %s" % (name, eg[-500:]))
        fails += 1
        continue
    toks = g["model"]["batch"] * g["model"]["seq"]
    print("big  %-45s loss %s step %.2f ms (spread %.2f) %.0f tok/s peak %.2f GiB reserved %.2f GiB pred %.2f GiB wall %.1fs" % (
        name, ["%.4f" % x for x in g["loss"]], g["step_time_ms_median"], g["step_time_ms_spread"],
        toks / g["step_time_ms_median"] * 1e3, g["peak_bytes"] / 2**30, g["peak_reserved_bytes"] / 2**30,
        g["predicted_peak_bytes"] / 2**30, tg))
    sys.stdout.flush()
print("cli failures:", fails)
sys.exit(1 if fails else 0)
