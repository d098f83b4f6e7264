#!/usr/bin/env bash
# The optimal policy against budget on the presets: at budgets a quarter, half and three
# quarters of the way from budget's smallest feasible budget to none's activation peak, each
# policy's recompute FLOPs (the simulator's walk of its plan) and optimal's share of budget's;
# optimal's smallest budget against budget's; the wall time of one `plan` and of one `frontier`
# (64 budgets) of optimal. Nothing runs.
# Usage: bench/optimal_vs_budget.sh [BUILD_DIR] [MODEL...]   (default: build, a set of presets)
set -euo pipefail
build="${1:-build}"
shift || true
B="$build/bin/rematlab-batch"
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(gpt2-350m megatron-530b llama-3.1-8b llama-3.1-405b qwen3-8b gemma-3-27b smollm3-3b falcon-7b)

smallest() {  # the smallest budget a policy plans to, from its refusal of a one-byte budget
  { "$B" plan --model "$1" --policy "$2" --memory-budget 1 2>&1 || true; } | sed -n 's/.*smallest feasible budget is \([0-9]*\) bytes.*/\1/p'
}
field() {  # plan --json's field
  python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"
}
now() { date +%s.%N; }

printf "%-16s %14s %14s %s\n" model smallest_opt smallest_bud "at 1/4, 1/2, 3/4: optimal/budget recompute FLOPs; plan s; frontier s"
for m in "${models[@]}"; do
  lo_b=$(smallest "$m" budget)
  lo_o=$(smallest "$m" optimal)
  hi=$("$B" plan --model "$m" --policy none --json | field activation_peak_bytes)
  shares=""
  for q in 1 2 3; do
    at=$((lo_b + (hi - lo_b) * q / 4))
    fo=$("$B" plan --model "$m" --policy optimal --memory-budget "$at" --json | field recompute_flops)
    fb=$("$B" plan --model "$m" --policy budget --memory-budget "$at" --json | field recompute_flops)
    shares+=" $(python3 -c "print(f'{$fo}/{$fb}=' + (f'{$fo/$fb:.3f}' if $fb else '-'))")"
  done
  t0=$(now)
  "$B" plan --model "$m" --policy optimal --memory-budget $(((lo_o + hi) / 2)) > /dev/null
  t1=$(now)
  "$B" frontier --model "$m" --policy optimal > /dev/null
  t2=$(now)
  printf "%-16s %14s %14s %s; %.2f; %.2f\n" "$m" "$lo_o" "$lo_b" "$shares" \
    "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)"
done
