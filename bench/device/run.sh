#!/usr/bin/env bash
# The GPU check, run on the GPU machine from the repository root after bench/device/pack.sh
# packed .device-bundle here. Unpacks, runs the `gpu` tests (fails if any of them skips),
# records raw CUPTI buffers of a small run (test data for the replay tests), sweeps gpt2-124m
# (batch 8, seq 1024) over every policy on CUDA with both attentions, runs the PyTorch anchor
# when PyTorch is there, and prints a short table last. Results go to $OUT.
# The NCCL tests and nccl_bench run after the gpu tests (a line per buffer size last).
# `run.sh tests` runs the gpu and NCCL tests alone; `run.sh speed` runs them and then the speed check
# (speed.sh beside this file: cuda_bench, the PyTorch anchors, the sweeps, and the table of
# speed targets last).
set -u
t_start=$(date +%s)
final="${OUT:-/tmp/remat-out}"
out=/tmp/remat-results   # everything goes here, packed into $final/results.tgz at the end
rm -rf "$out" && mkdir -p "$out" "$final"
R=/tmp/remat
rm -rf "$R" && tar -C /tmp -xJf .device-bundle/bundle.tar.xz || { echo "no bundle: run bench/device/pack.sh first"; exit 2; }
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:$R/lib:$R/runtime:${LD_LIBRARY_PATH:-}"
B="$R/bin/rematlab-batch"
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"

echo "== gpu tests"
t0=$(date +%s)
timeout 240 "$R/bin/remat_gpu_tests" --gtest_brief=1 > "$out/gpu_tests.log" 2>&1
rc=$?
tail -25 "$out/gpu_tests.log"
skipped=$(grep -c '\[  SKIPPED \]' "$out/gpu_tests.log" || true)
passed=$(grep -o '\[  PASSED  \] [0-9]* test' "$out/gpu_tests.log" | grep -o '[0-9]*' || echo 0)
failed=$(grep -c '\[  FAILED  \].*(' "$out/gpu_tests.log" || true)
if [ "$rc" -ne 0 ] || [ "${skipped:-0}" -ne 0 ]; then status=1; echo "GPU TESTS: rc=$rc skipped=$skipped"; fi
echo "gpu tests took $(( $(date +%s) - t0 )) s"
gpu_tests_line="gpu tests: passed=${passed:-0} failed=${failed:-0} skipped=${skipped:-0} rc=$rc"

# The NCCL communicator (world size 1) and its collectives 1 KiB to 256 MiB; needs libnccl.so.2
# (CUDA toolkit's lib64). Not in a bundle built without NCCL.
# With two or more GPUs also the two-rank tests and CUDA ranks end to end (rematlab-batch run
# --device cuda with --tp, --dp, --zero, --pp: tests/gpu/nccl_ranks_e2e.py); with one they are left out.
nccl_line="nccl: not in the bundle"
ranks_line="nccl ranks: not in the bundle"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [ -x "$R/bin/remat_nccl_tests" ]; then
  echo "== nccl"
  filter=""
  [ "${gpus:-0}" -lt 2 ] && filter="--gtest_filter=-NcclTwo.*"
  timeout 120 "$R/bin/remat_nccl_tests" --gtest_brief=1 $filter > "$out/nccl_tests.log" 2>&1
  nrc=$?
  tail -5 "$out/nccl_tests.log"
  nskipped=$(grep -c '\[  SKIPPED \]' "$out/nccl_tests.log" || true)
  npassed=$(grep -o '\[  PASSED  \] [0-9]* test' "$out/nccl_tests.log" | grep -o '[0-9]*' || echo 0)
  if [ "$nrc" -ne 0 ] || [ "${nskipped:-0}" -ne 0 ]; then status=1; fi
  nccl_line="nccl tests: passed=${npassed:-0} skipped=${nskipped:-0} rc=$nrc"
  timeout 60 "$R/bin/nccl_bench" --json "$out/nccl_bench.jsonl" > "$out/nccl_bench.txt" 2>&1 || status=1
  if [ "${gpus:-0}" -lt 2 ]; then
    ranks_line="nccl ranks: left out ($gpus GPU; CUDA ranks need one GPU each)"
  elif [ -f "$R/tests/gpu/nccl_ranks_e2e.py" ]; then
    timeout 900 python3 "$R/tests/gpu/nccl_ranks_e2e.py" --bin "$B" > "$out/nccl_ranks.log" 2>&1
    rrc=$?
    tail -5 "$out/nccl_ranks.log"
    [ "$rrc" -ne 0 ] && status=1
    ranks_line="nccl ranks ($gpus GPUs): rc=$rrc"
  fi
fi

if [ "${1:-}" = speed ]; then  # after the tests, the speed check instead of the default sweeps
  . "$(dirname "$0")/speed.sh"
  exit $status
fi

if [ "${1:-}" = tests ]; then  # only the gpu tests
  tar -C /tmp -czf "$final/results.tgz" remat-results 2>/dev/null
  echo "gpu tests: passed=${passed:-0} failed=${failed:-0} skipped=${skipped:-0} rc=$rc"
  echo "$nccl_line"; echo "$ranks_line"; [ -f "$out/nccl_bench.txt" ] && cat "$out/nccl_bench.txt"
  exit $status
fi

echo "== CUPTI record"
rm -rf /tmp/cupti && mkdir -p /tmp/cupti
REMAT_CUPTI_RECORD_DIR=/tmp/cupti timeout 60 "$B" run --model small --device cuda --steps 1 --warmup 0 --out /tmp/cupti-run --force > "$out/cupti_run.log" 2>&1 || status=1
tar -C /tmp -czf "$out/cupti_buffers.tgz" cupti cupti-run 2>/dev/null
ls /tmp/cupti | head -3

echo "== sweep"
sweep() {  # attention
  timeout 200 "$B" sweep --model gpt2-124m --device cuda --attention "$1" \
    --policies none,selective,uniform,uniform:segments=12,revolve:snapshots=3,offload,offload:what=checkpoints \
    ${2:-} --steps 5 --warmup 2 --out "/tmp/sweep-$1" --force > "$out/sweep_$1.txt" 2> "$out/sweep_$1.err" || status=1
  cat "$out/sweep_$1.txt"; tail -5 "$out/sweep_$1.err"
}
sweep flash "--memory-budgets 1200MiB,600MiB"
sweep naive
tar -C /tmp -czf "$out/sweeps.tgz" --exclude='memory_events.csv' --exclude='trace.json' sweep-flash sweep-naive 2>/dev/null

if [ -f .device-bundle/anchors/torch_anchor.py ] && python3 -c "import torch" 2>/dev/null; then
  echo "== PyTorch eager anchor (same GPU, same run)"
  timeout 150 python3 .device-bundle/anchors/torch_anchor.py /tmp/anchor.json --configs gpt2-124M \
    > "$out/torch_anchor.log" 2>&1
  cp /tmp/anchor.json "$out/" 2>/dev/null
  grep -v '^torch' "$out/torch_anchor.log" | python3 -c "
import json,sys
for l in sys.stdin:
    try: r=json.loads(l)
    except Exception: print(l.strip()); continue
    print(f\"torch {r['attn']:5s} {r['policy']:9s} peak {r['peak_MiB']:8.0f} MiB  {r['step_ms']:6.1f} ms\")"
fi

tar -C /tmp -czf "$final/results.tgz" remat-results 2>/dev/null

echo "== summary"
echo "gpu tests: passed=${passed:-0} failed=${failed:-0} skipped=${skipped:-0} rc=$rc"
for a in flash naive; do echo "-- ours, $a attention"; head -20 "$out/sweep_$a.txt"; done
echo "$nccl_line"; echo "$ranks_line"; [ -f "$out/nccl_bench.txt" ] && cat "$out/nccl_bench.txt"
exit $status
