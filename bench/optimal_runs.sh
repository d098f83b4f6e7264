#!/usr/bin/env bash
# The optimal policy run on the CPU at several budgets: for each, the measured activation peak
# and peak against the plan's prediction, the losses and gradient checksum against none's, and
# the step-time overhead against none beside the predicted recompute share (recompute FLOPs /
# none's FLOPs).
#
#   bench/optimal_runs.sh [BIN] [ROUNDS] [THREADS] [MODEL ARGS...]
#
# Default model: gpt2-124m at seq 256, batch 2. Budgets: optimal's smallest, a third and two
# thirds of the way from it to none's activation peak, and no budget (the minimum cut); with
# selective and budget (at the third) beside them; and optimal with offloads (offload_cost=4000)
# at its own smallest budget and at optimal's. Runs are interleaved round by round so a
# change in the machine's load falls on all alike; a policy's step time is the median over the
# rounds of each run's median counted step (3 steps after 1 warmup).
set -euo pipefail
BIN=${1:-build/bin/rematlab-batch}
ROUNDS=${2:-2}
THREADS=${3:-2}
shift 3 2>/dev/null || shift $#
MODEL=("$@")
[ ${#MODEL[@]} -gt 0 ] || MODEL=(--model gpt2-124m --seq 256 --batch 2)
WORK=$(mktemp -d /tmp/rematlab-optimal.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

lo=$({ "$BIN" plan "${MODEL[@]}" --policy optimal --memory-budget 1 2>&1 || true; } |
     sed -n 's/.*smallest feasible budget is \([0-9]*\) bytes.*/\1/p')
"$BIN" plan "${MODEL[@]}" --policy none --json > "$WORK/none.plan"
hi=$(json "$WORK/none.plan" "d['activation_peak_bytes']")
third=$((lo + (hi - lo) / 3))
# With offloads (offload_cost=4000 FLOPs a byte: a device of 1e15 FLOP/s on a 500 GB/s link),
# at their own smallest budget and at optimal's.
OFF=optimal:offload_cost=4000
lo_off=$({ "$BIN" plan "${MODEL[@]}" --policy $OFF --memory-budget 1 2>&1 || true; } |
         sed -n 's/.*smallest feasible budget is \([0-9]*\) bytes.*/\1/p')
[ -n "$lo" ] && [ -n "$lo_off" ] || { echo "no smallest budget in the optimal policy's refusal of 1 byte" >&2; exit 1; }
RUNS=("none|--policy none" "selective|--policy selective" "budget@1/3|--policy budget --memory-budget $third"
      "optimal (min-cut)|--policy optimal" "optimal@smallest|--policy optimal --memory-budget $lo"
      "optimal@1/3|--policy optimal --memory-budget $third"
      "optimal@2/3|--policy optimal --memory-budget $((lo + 2 * (hi - lo) / 3))"
      "offloads@their smallest|--policy $OFF --memory-budget $lo_off" "offloads@smallest|--policy $OFF --memory-budget $lo")

echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; $ROUNDS rounds; $THREADS threads; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg); ${MODEL[*]}" >&2
for r in $(seq 1 "$ROUNDS"); do
  for i in "${!RUNS[@]}"; do
    IFS='|' read -r name args <<< "${RUNS[$i]}"
    # shellcheck disable=SC2086
    "$BIN" run "${MODEL[@]}" $args --steps 3 --warmup 1 --threads "$THREADS" --out "$WORK/run" --force > /dev/null
    # shellcheck disable=SC2086
    [ "$r" = 1 ] && "$BIN" plan "${MODEL[@]}" $args --json > "$WORK/$i.plan"
    json "$WORK/run/summary.json" "d['step_time_ms_median']" >> "$WORK/$i.ms"
    cp "$WORK/run/summary.json" "$WORK/$i.summary"
  done
  echo "round $r of $ROUNDS done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

base_ms=$(median < "$WORK/0.ms")
base_total=$(json "$WORK/0.summary" "d['flops']['total']")
base_loss=$(json "$WORK/0.summary" "d['loss']")
base_sum=$(json "$WORK/0.summary" "d['grad_checksum']")
printf '| policy | activation peak (measured = predicted) | peak (measured = predicted) | losses, gradients = none | step ms | overhead vs none | predicted recompute share |\n'
printf '| --- | --- | --- | --- | --- | --- | --- |\n'
for i in "${!RUNS[@]}"; do
  IFS='|' read -r name args <<< "${RUNS[$i]}"
  s="$WORK/$i.summary" p="$WORK/$i.plan"
  act=$(json "$s" "d['activation_peak_bytes']") act_p=$(json "$p" "d['activation_peak_bytes']")
  pk=$(json "$s" "d['peak_bytes']") pk_p=$(json "$p" "d['predicted_peak_bytes']")
  same=no
  [ "$(json "$s" "d['loss']")" = "$base_loss" ] && [ "$(json "$s" "d['grad_checksum']")" = "$base_sum" ] && same=yes
  rc=$(json "$s" "d['flops']['recompute']")
  awk -v n="$name" -v a="$act" -v ap="$act_p" -v k="$pk" -v kp="$pk_p" -v same="$same" \
      -v m="$(median < "$WORK/$i.ms")" -v b="$base_ms" -v rc="$rc" -v bt="$base_total" \
      'BEGIN { printf "| %s | %.0f %s | %.0f %s | %s | %.1f | %+.1f%% | %.1f%% |\n", n, a, (a == ap ? "=" : "!= " ap), k,
               (k == kp ? "=" : "!= " kp), same, m, 100 * (m / b - 1), 100 * rc / bt }'
done
