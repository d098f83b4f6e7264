#!/usr/bin/env bash
# Do two builds compute the same bits? For each SIMD set (REMAT_SIMD), dtype and model, both
# binaries run `run --steps STEPS --warmup 0 --seed 3` and the script compares the losses, the
# gradient checksum (summary.json) and the sha256 of the saved weights; one line per case,
# "same" or "DIFFERENT", and exit status 1 if any differs.
#
#   bench/same_bits.sh BIN_A BIN_B [STEPS] [MODELS] [SETS]
#
# MODELS default "tiny small", SETS default "scalar AVX3 AVX2 SSE4 SSSE3 ONE_LANE" (a set this CPU
# lacks is reported and skipped). Extra run flags in EXTRA (e.g. EXTRA="--seq 128 --batch 1").
set -uo pipefail
A=$1
B=$2
STEPS=${3:-3}
MODELS=${4:-tiny small}
SETS=${5:-scalar AVX3 AVX2 SSE4 SSSE3 ONE_LANE}
WORK=$(mktemp -d /tmp/rematlab-same-bits.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail=0
facts() {  # losses, grad checksum of summary.json, then the weights' sha256
  /usr/bin/python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(j["grad_checksum"], [float.hex(x) for x in j["loss"]], end=" ")' "$1/summary.json"
  sha256sum "$2" | cut -c1-16
}
for set in $SETS; do
  for m in $MODELS; do
    for dt in bf16 fp32; do
      for side in A B; do
        bin=$A; [ "$side" = B ] && bin=$B
        if ! REMAT_SIMD=$set "$bin" run --model "$m" --dtype "$dt" ${EXTRA:-} --steps "$STEPS" --warmup 0 --seed 3 \
             --threads 2 --out "$WORK/$side" --save-weights "$WORK/$side.safetensors" > "$WORK/$side.log" 2>&1; then
          echo "$set $m $dt: $side did not run: $(tail -1 "$WORK/$side.log")"
          continue 3
        fi
        facts "$WORK/$side" "$WORK/$side.safetensors" > "$WORK/$side.facts"
        rm -rf "$WORK/$side"
      done
      if cmp -s "$WORK/A.facts" "$WORK/B.facts"; then
        echo "$set $m $dt: same ($(cut -c1-60 "$WORK/A.facts")...)"
      else
        echo "$set $m $dt: DIFFERENT"; cat "$WORK/A.facts" "$WORK/B.facts"; fail=1
      fi
    done
  done
done
exit $fail
