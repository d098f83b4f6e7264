#!/usr/bin/env bash
# Sets everything up and runs every test, in three stages, each announced with its time:
#   default   the default build's ctest (GPU tests skip with a message where there is no GPU)
#   sanitize  the unit and e2e tests under ASan + UBSan (scripts/sanitize.sh)
#   fuzz      each fuzz target over its regression inputs, then fuzzed for a while (scripts/fuzz.sh)
# REMAT_TEST_STAGES picks stages (default: "default sanitize fuzz"; e.g. REMAT_TEST_STAGES=default
# for a quick local run); REMAT_FUZZ_SECONDS is each fuzz target's time (default 30).
# Arguments go to the default stage's ctest. Every chosen stage runs even when one fails; the
# last line sums them up: "N passed, N failed, N skipped" (ctest tests of each stage, GPU tests
# without a GPU as skipped, plus fuzz targets).
set -uo pipefail
cd "$(dirname "$0")/.."
stages="${REMAT_TEST_STAGES:-default sanitize fuzz}"
stages="${stages//,/ }"
for s in $stages; do
  case "$s" in default | sanitize | fuzz) ;; *) echo "test: unknown stage '$s' in REMAT_TEST_STAGES (default sanitize fuzz)"; exit 2 ;; esac
done

echo "==================== setup and the default build ===================="
scripts/setup.sh test || exit 1
setup_s=$SECONDS

total_passed=0
total_failed=0
total_skipped=0
summary=("$(printf '%-9s %5d s' setup "$setup_s")")
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

# Adds what a stage's log reports to the totals: ctest's "N tests failed out of M" (less the
# tests it lists as skipped), or the
# fuzz script's "N passed, N failed"; a stage that reports neither counts as one failure.
# Sets stage_counts.
count() {
  local log=$1 line p f k=0
  if line=$(grep -E "tests? failed out of [0-9]+" "$log" | tail -1) && [ -n "$line" ]; then
    f=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
    k=$(grep -cE "^[[:space:]]+[0-9]+ - .*\(Skipped\)$" "$log")
    p=$(( $(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$line") - f - k ))
  elif line=$(grep -E "^fuzz: [0-9]+ passed, [0-9]+ failed$" "$log" | tail -1) && [ -n "$line" ]; then
    p=$(sed -E 's/fuzz: ([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.*passed, ([0-9]+) failed/\1/' <<<"$line")
  else
    p=0
    f=1
  fi
  total_passed=$((total_passed + p))
  total_failed=$((total_failed + f))
  total_skipped=$((total_skipped + k))
  stage_counts="$p passed, $f failed, $k skipped"
}

run_stage() {
  local name=$1
  shift
  echo
  echo "==================== test stage: $name ===================="
  local start=$SECONDS rc
  "$@" 2>&1 | tee "$logdir/$name.log"
  rc=${PIPESTATUS[0]}
  count "$logdir/$name.log"
  if [ "$rc" -ne 0 ] && [[ "$stage_counts" == *", 0 failed,"* ]]; then
    total_failed=$((total_failed + 1))
    stage_counts="$stage_counts, and exit $rc"
  fi
  summary+=("$(printf '%-9s %5d s  exit %d  %s' "$name" $((SECONDS - start)) "$rc" "$stage_counts")")
  echo "==================== test stage $name: exit $rc after $((SECONDS - start)) s ===================="
}

for s in $stages; do
  case "$s" in
    default) run_stage default ctest --test-dir build --output-on-failure -j "$(nproc)" "$@" ;;
    sanitize) run_stage sanitize scripts/sanitize.sh ;;
    fuzz) run_stage fuzz scripts/fuzz.sh "${REMAT_FUZZ_SECONDS:-30}" ;;
  esac
done

echo
echo "==================== test stages ===================="
printf '%s\n' "${summary[@]}"
echo "$total_passed passed, $total_failed failed, $total_skipped skipped"
[ "$total_failed" -eq 0 ]
