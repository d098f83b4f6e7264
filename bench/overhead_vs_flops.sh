#!/usr/bin/env bash
# Does a checkpoint policy's step-time overhead on the CPU follow its extra FLOPs?
#
#   bench/overhead_vs_flops.sh [BIN] [ROUNDS] [THREADS]
#
# For `small` and gpt2-124m at seq 128, batch 1: `selective`, `uniform` (round(sqrt L)
# segments) and per-block checkpointing (`uniform:segments=L`) against `none`. Runs are
# interleaved (round 1: every shape and policy, round 2: ...) so that a change in the machine's
# load falls on all of them alike; each run's figure is its median counted step (3 steps after
# 1 warmup), and the table gives each policy's median over the rounds. The FLOPs are the last
# counted step's, from summary.json: extra = recompute FLOPs / none's total FLOPs.
set -euo pipefail
BIN=${1:-build/bin/rematlab-batch}
ROUNDS=${2:-3}
THREADS=${3:-2}
WORK=$(mktemp -d /tmp/rematlab-overhead.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

SHAPES=("small" "gpt2-124m-s128-b1")
declare -A ARGS=([small]="--model small" [gpt2-124m-s128-b1]="--model gpt2-124m --seq 128 --batch 1")
declare -A LAYERS=([small]=6 [gpt2-124m-s128-b1]=12)
policies() { echo "none selective uniform uniform:segments=$1"; }
label() { case $1 in uniform:segments=*) echo "per-block (${1#uniform:})" ;; uniform) echo "sqrt (uniform)" ;; *) echo "$1" ;; esac; }

# FIELD of summary.json: a top-level number, or one of the "flops" object's.
field() { grep -o "\"$2\": *[0-9.e+-]*" "$1" | head -1 | sed 's/.*: *//'; }
flops() { awk -v k="\"$2\":" '/"flops": *\{/ {f = 1} f && $1 == k {gsub(/,/, "", $2); print $2; exit} f && /\}/ {f = 0}' "$1"; }
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; $ROUNDS rounds; $THREADS threads; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq 1 "$ROUNDS"); do
  for s in "${SHAPES[@]}"; do
    for p in $(policies "${LAYERS[$s]}"); do
      key="$s.${p//[:=]/_}"
      # shellcheck disable=SC2086
      "$BIN" run ${ARGS[$s]} --policy "$p" --steps 3 --warmup 1 --threads "$THREADS" \
        --out "$WORK/run" --force > /dev/null
      field "$WORK/run/summary.json" step_time_ms_median >> "$WORK/$key.ms"
      flops "$WORK/run/summary.json" total > "$WORK/$key.total"
      flops "$WORK/run/summary.json" recompute > "$WORK/$key.recompute"
    done
  done
  echo "round $r of $ROUNDS done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done
rm -rf "$WORK/run"

printf '| shape | policy | step ms (median of %d) | overhead vs none | recompute GFLOP | extra FLOPs vs none |\n' "$ROUNDS"
printf '| --- | --- | --- | --- | --- | --- |\n'
for s in "${SHAPES[@]}"; do
  base_ms=$(median < "$WORK/$s.none.ms")
  base_total=$(cat "$WORK/$s.none.total")
  for p in $(policies "${LAYERS[$s]}"); do
    key="$s.${p//[:=]/_}"
    awk -v s="$s" -v p="$(label "$p")" -v m="$(median < "$WORK/$key.ms")" -v b="$base_ms" \
        -v rc="$(cat "$WORK/$key.recompute")" -v bt="$base_total" \
        'BEGIN { printf "| %s | %s | %.1f | %+.1f%% | %.2f | %+.1f%% |\n", s, p, m, 100 * (m / b - 1), rc / 1e9, 100 * rc / bt }'
  done
done
