#!/usr/bin/env bash
# The CPU step of a mixture of many small experts (Qwen3-30B-A3B's shape at 1/8 of its widths:
# 128 experts of width 96, top-8, hidden 256, 2 layers, seq 512, batch 1: 32 rows an expert on
# average, each expert's GEMM below what one is split over lanes for) under two builds, alternated, so that
# a change to the experts' GEMMs (cpu_expert_gemm.cpp) can be timed against the build before it.
#
#   bench/expert_gemm_groups.sh BIN_BEFORE BIN_AFTER [ROUNDS] [THREADS]
#
# Each round runs both binaries once per dtype (`run --steps 3 --warmup 1`, its median counted
# step); the table gives the median over the rounds and after / before (below 1: faster).
# OPENBLAS_CORETYPE, when set, applies to both.
set -euo pipefail
A=$1
B=$2
ROUNDS=${3:-5}
THREADS=${4:-2}
WORK=$(mktemp -d /tmp/rematlab-expert-gemm.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/moe.json" <<'JSON'
{"name": "bench-many-experts", "architecture": "qwen3_moe", "layers": 2, "hidden": 256, "heads": 4, "kv_heads": 1,
 "head_dim": 64, "ffn": 768, "seq": 512, "batch": 1, "vocab": 4096, "positions": 512, "dtype": "bf16",
 "attention": "flash", "rope_theta": 10000.0, "moe": {"experts": 128, "top_k": 8, "ffn": 96, "norm_topk": true}}
JSON
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; $ROUNDS rounds; $THREADS threads; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq 1 "$ROUNDS"); do
  for dt in bf16 fp32; do
    for which in a b; do
      bin=$A
      [ "$which" = b ] && bin=$B
      out=$WORK/run-$which-$dt-$r
      "$bin" run --model "$WORK/moe.json" --dtype "$dt" --steps 3 --warmup 1 --threads "$THREADS" --out "$out" > /dev/null
      grep -o '"step_time_ms_median": *[0-9.e+-]*' "$out/summary.json" | sed 's/.*: *//' >> "$WORK/$which-$dt"
      rm -rf "$out"
    done
  done
done
printf "%-6s %12s %12s %8s\n" dtype "before ms" "after ms" ratio
for dt in bf16 fp32; do
  a=$(median < "$WORK/a-$dt")
  b=$(median < "$WORK/b-$dt")
  printf "%-6s %12.1f %12.1f %8.2f\n" "$dt" "$a" "$b" "$(echo "$b / $a" | bc -l)"
done
