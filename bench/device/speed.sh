# The speed check, `bash bench/device/run.sh speed` on the GPU machine: sourced by run.sh after
# it unpacked the bundle and ran the gpu tests (uses its R, B, out, final, status, t_start and
# gpu_tests_line). Runs, in this order, cuda_bench, the SDPA anchor, our gpt2-124m sweeps (flash
# with memory budgets and deeper offload prefetch, naive; CUPTI on), the torch.compile anchor,
# the PyTorch eager anchor and cuda_bench's steps again under each REMAT_CUPTI_API variant, then
# prints the tests' line and one table of the speed targets last (speed_table.py). Everything must end within 8 minutes of run.sh's start: each
# piece runs under `timeout`, cut to what is left before the deadline (REMAT_SPEED_BUDGET_S
# seconds after the start, 450 by default), most important first; a piece cut short leaves the
# JSON lines it printed so far.
here=$(dirname "$0")  # bench/device, beside run.sh
deadline=$(( t_start + ${REMAT_SPEED_BUDGET_S:-450} ))

# piece NAME MAX_S OUTFILE COMMAND...: stdout to $out/OUTFILE, stderr to $out/NAME.err.
piece() {
  local name=$1 max=$2 file=$3; shift 3
  local s=$(( deadline - $(date +%s) ))
  [ "$s" -gt "$max" ] && s=$max
  if [ "$s" -lt 15 ]; then
    echo "== $name: skipped, ${s} s left before the deadline"; status=1; return 0
  fi
  echo "== $name (at most ${s} s)"
  local t0; t0=$(date +%s)
  timeout -k 5 "$s" "$@" > "$out/$file" 2> "$out/$name.err"
  local rc=$?
  echo "$name: rc=$rc after $(( $(date +%s) - t0 )) s"
  if [ "$rc" -ne 0 ]; then status=1; tail -3 "$out/$name.err"; fi
  return 0
}

# One line per run of a sweep's comparison JSON.
show_sweep() {
  python3 - "$1" <<'EOF'
import json, sys
try:
    runs = json.load(open(sys.argv[1]))["runs"]
except Exception as e:
    print("  (no sweep JSON: %r)" % e); sys.exit(0)
for r in runs:
    ov = r.get("step_overhead_pct")
    print("  %-26s %-14s peak %6.2f GiB  %8.2f ms  %s" % (r["run"], r["status"], r["peak_bytes"] / 2**30,
          r["step_time_ms_median"], "" if ov is None else "%+.1f%%" % ov))
EOF
}

have_torch=0
python3 -c "import torch" 2>/dev/null && have_torch=1

if [ -x "$R/bin/cuda_bench" ]; then
  piece cuda_bench 150 cuda_bench.jsonl "$R/bin/cuda_bench"
  sed -n '/^== cuda_bench summary/,$p' "$out/cuda_bench.jsonl"
else
  echo "== cuda_bench: not in the bundle (run bench/device/pack.sh on a CUDA build)"; status=1
fi

[ "$have_torch" = 1 ] && piece sdpa 60 sdpa.jsonl python3 "$here/sdpa_anchor.py"

policies=none,selective,uniform,uniform:segments=12,revolve:snapshots=3,offload,offload:what=checkpoints
# Offload with deeper prefetch (and so more blocks kept): both copy directions overlap.
piece sweep_flash 120 sweep_flash.json "$B" sweep --model gpt2-124m --device cuda --attention flash \
  --policies "$policies,offload:prefetch=3,offload:prefetch=5,offload:what=checkpoints,prefetch=2" \
  --memory-budgets 1200MiB,600MiB \
  --steps 10 --warmup 2 \
  --out /tmp/sweep-flash --force --json
show_sweep "$out/sweep_flash.json"
piece sweep_naive 100 sweep_naive.json "$B" sweep --model gpt2-124m --device cuda --attention naive \
  --policies "$policies,offload:what=checkpoints,prefetch=2" --steps 10 --warmup 2 \
  --out /tmp/sweep-naive --force --json
show_sweep "$out/sweep_naive.json"
for a in flash naive; do  # where the none step's time goes, by kernel and by op
  python3 "$here/kernel_table.py" "/tmp/sweep-$a/none" --top 12 > "$out/kernels_$a.txt" 2>&1
  echo "-- none, $a attention:"; head -15 "$out/kernels_$a.txt"
done
tar -C /tmp -czf "$out/sweeps.tgz" --exclude='memory_events.csv' --exclude='trace.json' sweep-flash sweep-naive 2>/dev/null

A=.device-bundle/anchors
if [ "$have_torch" = 1 ] && [ -f "$A/torch_compile_anchor.py" ]; then
  piece compile_anchor 220 compile_anchor.log python3 "$A/torch_compile_anchor.py" /tmp/compile_anchor.json
  grep '"kind": "compile"' "$out/compile_anchor.log"
fi
if [ "$have_torch" = 1 ] && [ -f "$A/torch_anchor.py" ]; then
  piece torch_anchor 150 torch_anchor.log python3 "$A/torch_anchor.py" /tmp/anchor.json --configs gpt2-124M
  grep '^{' "$out/torch_anchor.log" | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print(f\"  torch eager {r['attn']:5s} {r['policy']:9s} peak {r['peak_MiB']:8.0f} MiB  {r['step_ms']:6.1f} ms\")"
fi
[ "$have_torch" = 1 ] || echo "== no PyTorch here: the peers' figures come from the anchors file"

# CUPTI with fewer API record kinds (the default enables both): on/off per variant, each in its
# own process, since CUPTI stays attached once enabled; then 32 flash rows a warp and the
# cuBLAS path of the naive attention's probabilities. Last, in whatever time is left.
if [ -x "$R/bin/cuda_bench" ]; then
  for api in driver runtime; do
    REMAT_CUPTI_API=$api piece cupti_$api 40 cupti_$api.jsonl "$R/bin/cuda_bench" --quick --only steps
    grep -h 'cupti' "$out/cupti_$api.jsonl" | grep -i 'ms (median' | sed "s/^/  [REMAT_CUPTI_API=$api] /"
  done
  # The flash steps with 32 query rows a warp in the forward and dQ kernels.
  REMAT_FLASH_ROWS=32 piece flash_rows32 40 flash_rows32.jsonl "$R/bin/cuda_bench" --quick --only steps
  grep -h 'flash' "$out/flash_rows32.jsonl" | grep -i 'ms (median' | sed "s/^/  [REMAT_FLASH_ROWS=32] /"
  # Naive attention's probabilities through cuBLAS and the softmax kernel, against the fused kernel.
  REMAT_ATTN_PROBS=gemm piece probs_gemm 40 probs_gemm.jsonl "$R/bin/cuda_bench" --quick --only steps
  grep -h 'naive' "$out/probs_gemm.jsonl" | grep -i 'ms (median' | sed "s/^/  [REMAT_ATTN_PROBS=gemm] /"
fi

python3 "$here/speed_table.py" "$out" --out "$out/speed_table.txt" > /dev/null 2> "$out/speed_table.err" \
  || { status=1; cat "$out/speed_table.err"; }
tar -C /tmp -czf "$final/results.tgz" remat-results 2>/dev/null
echo "speed check took $(( $(date +%s) - t_start )) s, status $status"
echo
echo "${gpu_tests_line:-gpu tests: not run}"
cat "$out/speed_table.txt" 2>/dev/null
