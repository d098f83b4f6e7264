#!/usr/bin/env bash
# RematLab's CPU training step against PyTorch's on the same GPT-2 shapes, bf16 and fp32.
#
#   bench/vs_pytorch.sh [BIN] [ROUNDS] [THREADS]
#
# Shapes: the presets tiny and small with their naive attention and again with flash attention
# on our side, and gpt2-124m at seq 128, batch 1 (its dropout 0) with its flash attention and
# again with naive attention. PyTorch writes attention out in every case. Every round runs each (shape, dtype)
# once in RematLab (`run --steps 5 --warmup 1 --threads THREADS`, its median counted step) and
# once in PyTorch (bench/pytorch_step.py, same steps, torch.set_num_threads(THREADS)), one
# after the other, so a change in the machine's load falls on both; the table gives the median
# over the rounds of each and the ratio RematLab / PyTorch (below 1: RematLab is faster).
# PyTorch runs with OMP_WAIT_POLICY=PASSIVE and OPENBLAS_NUM_THREADS=$TORCH_BLAS_THREADS
# (default THREADS; PyTorch's fp32 GEMMs go to OpenBLAS, its bf16 ones to oneDNN).
# OPENBLAS_CORETYPE, when set, applies to both.
set -euo pipefail
BIN=${1:-build/bin/rematlab-batch}
ROUNDS=${2:-3}
THREADS=${3:-2}
TORCH_BLAS_THREADS=${TORCH_BLAS_THREADS:-$THREADS}
HERE=$(cd "$(dirname "$0")" && pwd)
PRESETS=$HERE/../resources/presets
PY=/usr/bin/python3
# name preset seq batch attention (ours; - keeps the preset's)
SHAPES=("tiny tiny 0 0 -" "tiny-flash tiny 0 0 flash" "small small 0 0 -" "small-flash small 0 0 flash"
        "gpt2-124m-s128 gpt2-124m 128 1 -" "gpt2-124m-s128-naive gpt2-124m 128 1 naive")
DTYPES=(bf16 fp32)
WORK=$(mktemp -d /tmp/rematlab-vs-pytorch.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; $ROUNDS rounds; $THREADS threads; PyTorch OPENBLAS_NUM_THREADS=$TORCH_BLAS_THREADS; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq 1 "$ROUNDS"); do
  for s in "${SHAPES[@]}"; do
    read -r name preset seq batch attn <<< "$s"
    over=()
    [ "$seq" != 0 ] && over+=(--seq "$seq")
    [ "$batch" != 0 ] && over+=(--batch "$batch")
    ours=()
    [ "$attn" != - ] && ours+=(--attention "$attn")
    for dt in "${DTYPES[@]}"; do
      out=$WORK/run-$name-$dt-$r
      "$BIN" run --model "$preset" --dtype "$dt" "${over[@]}" ${ours[@]+"${ours[@]}"} --steps 5 --warmup 1 \
        --threads "$THREADS" --out "$out" > /dev/null
      grep -o '"step_time_ms_median": *[0-9.e+-]*' "$out/summary.json" | sed 's/.*: *//' \
        >> "$WORK/$name-$dt.ours"
      rm -rf "$out"
      OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=$TORCH_BLAS_THREADS \
        "$PY" "$HERE/pytorch_step.py" "$PRESETS/$preset.json" --dtype "$dt" "${over[@]}" \
        --steps 5 --warmup 1 --threads "$THREADS" |
        "$PY" -c 'import json, sys; print(json.load(sys.stdin)["median_ms"])' >> "$WORK/$name-$dt.torch"
    done
  done
  echo "round $r of $ROUNDS done" >&2
done

printf '| shape | dtype | RematLab ms | PyTorch ms | RematLab / PyTorch |\n| --- | --- | --- | --- | --- |\n'
for s in "${SHAPES[@]}"; do
  read -r name _ _ _ _ <<< "$s"
  for dt in "${DTYPES[@]}"; do
    a=$(median < "$WORK/$name-$dt.ours")
    b=$(median < "$WORK/$name-$dt.torch")
    awk -v n="$name" -v d="$dt" -v a="$a" -v b="$b" \
      'BEGIN { printf "| %s | %s | %.1f | %.1f | %.2f |\n", n, d, a, b, a / b }'
  done
done
