#!/usr/bin/env bash
# RematLab's CPU training step of a small mixture of experts (Mixtral-style: 8 experts, top-2,
# dropless, 4 layers, hidden 512, expert width 1024, seq 512, batch 2) against PyTorch eager's
# (bench/pytorch_moe_step.py: Hugging Face's sparse block as eager runs it), bf16 and fp32.
#
#   bench/moe_vs_pytorch.sh [BIN] [ROUNDS] [THREADS]
#
# Our side runs with naive attention (as PyTorch's, written out) and again with flash attention.
# Every round runs each (attention, dtype) once in RematLab (`run --steps 3 --warmup 1`, its
# median counted step) and once in PyTorch (same steps), one after the other, so a change in the
# machine's load falls on both; the table gives the median over the rounds and the ratio
# RematLab / PyTorch (below 1: RematLab is faster). OPENBLAS_CORETYPE, when set, applies to both.
set -euo pipefail
BIN=${1:-build/bin/rematlab-batch}
ROUNDS=${2:-3}
THREADS=${3:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
WORK=$(mktemp -d /tmp/rematlab-moe-vs-pytorch.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/moe.json" <<'JSON'
{"name": "bench-moe", "architecture": "mixtral", "layers": 4, "hidden": 512, "heads": 8, "kv_heads": 4,
 "ffn": 1024, "seq": 512, "batch": 2, "vocab": 4096, "positions": 512, "dtype": "bf16", "attention": "naive",
 "rope_theta": 10000.0, "moe": {"experts": 8, "top_k": 2, "ffn": 1024, "norm_topk": true}}
JSON
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; $ROUNDS rounds; $THREADS threads; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq 1 "$ROUNDS"); do
  for dt in bf16 fp32; do
    for attn in naive flash; do
      out=$WORK/run-$attn-$dt-$r
      "$BIN" run --model "$WORK/moe.json" --dtype "$dt" --attention "$attn" --steps 3 --warmup 1 \
        --threads "$THREADS" --out "$out" > /dev/null
      grep -o '"step_time_ms_median": *[0-9.e+-]*' "$out/summary.json" | sed 's/.*: *//' >> "$WORK/$attn-$dt.ours"
      rm -rf "$out"
    done
    OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=$THREADS "$PY" "$HERE/pytorch_moe_step.py" "$WORK/moe.json" \
      --dtype "$dt" --steps 3 --warmup 1 --threads "$THREADS" |
      "$PY" -c 'import json, sys; print(json.load(sys.stdin)["median_ms"])' >> "$WORK/$dt.torch"
  done
  echo "round $r of $ROUNDS done" >&2
done

printf '| attention (ours) | dtype | RematLab ms | PyTorch eager ms | RematLab / PyTorch |\n| --- | --- | --- | --- | --- |\n'
for dt in bf16 fp32; do
  b=$(median < "$WORK/$dt.torch")
  for attn in naive flash; do
    a=$(median < "$WORK/$attn-$dt.ours")
    awk -v n="$attn" -v d="$dt" -v a="$a" -v b="$b" 'BEGIN { printf "| %s | %s | %.1f | %.1f | %.2f |\n", n, d, a, b, a / b }'
  done
done
