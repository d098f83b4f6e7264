#!/usr/bin/env bash
# Import and `plan` of every published config.json in tests/data/hf-configs, one process per
# file (`plan --model FILE`, the default policy): a file the import refuses ends there, with its
# message; one it takes is planned. Prints each file's outcome and wall time, then the total.
#
#   bench/hf_configs_plan.sh [BIN] [DIR] [MAX_S]
#
# A benchmark, not a test: with MAX_S it exits non-zero when the total takes longer.
set -euo pipefail
BIN=${1:-build/bin/rematlab-batch}
DIR=${2:-tests/data/hf-configs}
MAX_S=${3:-}
echo "$BIN; $DIR; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
planned=0 refused=0
start=$(date +%s%N)
for f in "$DIR"/*.json; do
  s=$(date +%s%N)
  if "$BIN" plan --model "$f" > /dev/null 2>&1; then
    outcome=planned; planned=$((planned + 1))
  else
    outcome=refused; refused=$((refused + 1))
  fi
  e=$(date +%s%N)
  printf '%-34s %-8s %6.1f ms\n' "$(basename "$f")" "$outcome" "$(echo "($e - $s) / 1000000" | bc -l)"
done
end=$(date +%s%N)
total=$(echo "($end - $start) / 1000000000" | bc -l)
printf 'files %d: planned %d, refused %d; total %.3f s\n' $((planned + refused)) "$planned" "$refused" "$total"
if [ -n "$MAX_S" ] && [ "$(echo "$total > $MAX_S" | bc -l)" = 1 ]; then
  echo "over $MAX_S s" >&2
  exit 1
fi
