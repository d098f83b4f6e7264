#!/usr/bin/env bash
# Sets everything up and runs every test, in three stages, each announced with its time:
#   default   the default build's ctest (GPU tests are not started where there is no GPU; they
#             are listed as skipped)
#   sanitize  the unit and e2e tests under ASan + UBSan (scripts/sanitize.sh)
#   fuzz      each fuzz target over its regression inputs, then fuzzed for a while (scripts/fuzz.sh)
# REMAT_TEST_STAGES picks stages (default: "default sanitize fuzz"; e.g. REMAT_TEST_STAGES=default
# for a quick local run); REMAT_FUZZ_SECONDS is each fuzz target's time (default 30).
# Arguments go to the default stage's ctest. Every chosen stage runs even when one fails. At the
# end: a table of the stages with their times against their budgets (docs/testing.md), the ten
# slowest tests, and the last line sums up: "N passed, N failed, N skipped" (ctest tests of each
# stage, GPU tests without a GPU as skipped, plus fuzz targets; a stage that cannot run here,
# e.g. without clang, is named as skipped).
set -uo pipefail
cd "$(dirname "$0")/.."
stages="${REMAT_TEST_STAGES:-default sanitize fuzz}"
stages="${stages//,/ }"
for s in $stages; do
  case "$s" in default | sanitize | fuzz) ;; *) echo "test: unknown stage '$s' in REMAT_TEST_STAGES (default sanitize fuzz)"; exit 2 ;; esac
done

# Each stage's budget in seconds on the 2-core CI machine, cold (docs/testing.md, "Budget").
declare -A budget=([setup]=900 [default]=180 [sanitize]=720 [fuzz]=300 [total]=2100)

echo "==================== setup and the default build ===================="
scripts/setup.sh test || exit 1
setup_s=$SECONDS

total_passed=0
total_failed=0
total_skipped=0
skipped_stages=()
over=()
row() {  # name seconds rest...
  local name=$1 secs=$2 mark=""
  shift 2
  if [ "$secs" -gt "${budget[$name]}" ]; then
    mark="  OVER BUDGET"
    over+=("$name")
  fi
  printf '%-9s %5d s  (budget %4d s)  %s%s' "$name" "$secs" "${budget[$name]}" "$*" "$mark"
}
summary=("$(row setup "$setup_s")")
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

# Adds what a stage's log reports to the totals: ctest's "N tests failed out of M" (M leaves out
# the tests ctest did not start: those it lists as Skipped are among M, the Disabled ones, GPU
# tests without a GPU, are not), or the fuzz script's "N passed, N failed"; a stage that reports
# neither counts as one failure. Sets stage_counts.
count() {
  local log=$1 line p f k=0 d=0
  if line=$(grep -E "tests? failed out of [0-9]+" "$log" | tail -1) && [ -n "$line" ]; then
    f=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
    k=$(grep -cE "^[[:space:]]+[0-9]+ - .*\(Skipped\)$" "$log")
    d=$(grep -cE "^[[:space:]]+[0-9]+ - .*\(Disabled\)$" "$log")
    p=$(( $(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$line") - f - k ))
    k=$((k + d))
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
  if [ "$rc" -eq 77 ]; then
    # The stage cannot run on this machine (its script said why in one line).
    skipped_stages+=("$name")
    stage_counts="skipped: $(grep -m1 -E "^$name: skipped" "$logdir/$name.log" | sed -E "s/^$name: skipped: //")"
  else
    count "$logdir/$name.log"
    if [ "$rc" -ne 0 ] && [[ "$stage_counts" == *", 0 failed,"* ]]; then
      total_failed=$((total_failed + 1))
      stage_counts="$stage_counts, and exit $rc"
    fi
  fi
  summary+=("$(row "$name" $((SECONDS - start)) "exit $rc  $stage_counts")")
  echo "==================== test stage $name: exit $rc after $((SECONDS - start)) s ===================="
}

for s in $stages; do
  case "$s" in
    default) run_stage default ctest --test-dir build --output-on-failure --timeout 600 -j "$(nproc)" "$@" ;;
    sanitize) run_stage sanitize scripts/sanitize.sh ;;
    fuzz) run_stage fuzz scripts/fuzz.sh "${REMAT_FUZZ_SECONDS:-30}" ;;
  esac
done

echo
echo "==================== the ten slowest tests ===================="
# ctest's result lines: "12/345 Test  #67: name ......   Passed    1.23 sec".
for s in $stages; do
  [ -f "$logdir/$s.log" ] || continue
  sed -nE "s/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .* ([0-9]+\.[0-9]+) sec$/\2 $s \1/p" "$logdir/$s.log"
done | sort -rn | head -10 | awk '{printf "%8.1f s  %-9s %s\n", $1, $2, $3}'

echo
echo "==================== test stages ===================="
summary+=("$(row total "$SECONDS")")
printf '%s\n' "${summary[@]}"
[ ${#over[@]} -gt 0 ] && echo "over budget: ${over[*]} (docs/testing.md, \"Budget\")"
last="$total_passed passed, $total_failed failed, $total_skipped skipped"
[ ${#skipped_stages[@]} -gt 0 ] && last="$last; stages not run here: ${skipped_stages[*]}"
echo "$last"
[ "$total_failed" -eq 0 ]
