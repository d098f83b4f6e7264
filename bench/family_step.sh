#!/usr/bin/env bash
# The CPU training step of each model family against the same-sized `llama` step.
#
#   bench/family_step.sh [BIN] [ROUNDS] [SEQ] [ATTENTION] [SIZES]
#
# Every family gets the same sizes: SIZES=tiny (default) is llama-tiny's (4 blocks, hidden 128,
# 8 heads of 16 over 2 kv heads, ffn 352, batch 4, vocab 256), SIZES=d64 the same with hidden 256,
# 4 heads of 64 over 2 kv heads and ffn 704; at SEQ tokens (default 256) with its own features; Mistral and Gemma 2 get
# a window of SEQ / 2 (banded attention), Gemma 2 its soft-caps; `gemma2-full` is Gemma 2 with
# its window at SEQ (every key seen, the most work a Gemma 2 block does). Runs are interleaved
# (round 1: every family, round 2: every family, ...) so that a change in the machine's load
# falls on all of them alike; each run's figure is its median counted step, and the table
# gives each family's median over the rounds and its ratio to llama's.
set -euo pipefail
BIN=${1:-build/bin/rematlab-batch}
ROUNDS=${2:-5}
SEQ=${3:-256}
ATTN=${4:-naive}
SIZES=${5:-tiny}
case $SIZES in
  tiny) HIDDEN=128 HEADS=8 FFN=352 ;;
  d64) HIDDEN=256 HEADS=4 FFN=704 ;;
  *) echo "family_step.sh: SIZES must be tiny or d64, got '$SIZES'" >&2; exit 2 ;;
esac
FAMILIES=(llama gpt2 mistral qwen2 gemma gemma2 gemma2-full phi3 olmo2)
WORK=$(mktemp -d /tmp/rematlab-family-step.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

model_json() {  # FAMILY -> a model file of our format
  local f=$1 arch=${1%-full} extra=""
  case $f in
    mistral) extra=", \"sliding_window\": $((SEQ / 2))" ;;
    gemma2) extra=", \"sliding_window\": $((SEQ / 2)), \"attn_softcap\": 50.0, \"final_softcap\": 30.0" ;;
    gemma2-full) extra=", \"sliding_window\": $SEQ, \"attn_softcap\": 50.0, \"final_softcap\": 30.0" ;;
  esac
  local kv=2
  [ "$f" = gpt2 ] && kv=$HEADS
  cat > "$WORK/$f.json" <<EOF
{"name": "$f-bench", "architecture": "$arch", "layers": 4, "hidden": $HIDDEN, "heads": $HEADS, "kv_heads": $kv,
 "ffn": $FFN, "seq": $SEQ, "positions": $SEQ, "batch": 4, "vocab": 256, "dropout": 0.0,
 "attention": "$ATTN", "dtype": "bf16"$extra}
EOF
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

for f in "${FAMILIES[@]}"; do model_json "$f"; done
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; $ROUNDS rounds; seq $SEQ; $ATTN attention; sizes $SIZES; $(nproc) cores" >&2
for r in $(seq 1 "$ROUNDS"); do
  for f in "${FAMILIES[@]}"; do
    "$BIN" run --model "$WORK/$f.json" --steps 5 --warmup 1 --out "$WORK/run-$f-$r" > /dev/null
    grep -o '"step_time_ms_median": *[0-9.e+-]*' "$WORK/run-$f-$r/summary.json" | sed 's/.*: *//' \
      >> "$WORK/$f.ms"
    rm -rf "$WORK/run-$f-$r"
  done
  echo "round $r of $ROUNDS done" >&2
done

base=$(median < "$WORK/llama.ms")
printf '| family | step ms (median of %d runs) | / llama |\n| --- | --- | --- |\n' "$ROUNDS"
for f in "${FAMILIES[@]}"; do
  m=$(median < "$WORK/$f.ms")
  awk -v f="$f" -v m="$m" -v b="$base" 'BEGIN { printf "| %s | %.1f | %.2f |\n", f, m, m / b }'
done
