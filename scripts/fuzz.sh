#!/usr/bin/env bash
# Builds the fuzz targets of the `sanitize` preset (clang, libFuzzer, ASan + UBSan, in
# build-sanitize/, the same build as the sanitizer tests) and runs each target: first over its
# regression inputs (tests/fuzz-regressions/TARGET/), then fuzzing for SECONDS from its seeds
# (fuzz/corpus/TARGET, the fixtures and what rematlab-fuzz-seeds writes). Targets run side by
# side, one per core. Exits non-zero on any finding, printing the sanitizer report, the
# reproducer and how to keep it as a regression input. docs/testing.md.
# Without clang and its runtimes the stage cannot run: one line, exit 77 (a skipped stage).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]     (default: 30 seconds each, every target)
set -uo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
shift || true
jobs="${REMAT_BUILD_JOBS:-$(nproc)}"
out=build-sanitize
bin=$out/bin
limits=(-rss_limit_mb=2048 -timeout=10)
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"

if ! why=$(scripts/clang-check.sh); then
  echo "fuzz: skipped: $why"
  exit 77
fi
if ! { cmake --preset sanitize >/dev/null && cmake --build $out -j "$jobs" --target remat_fuzz_targets; }; then
  echo "fuzz: the fuzz build failed"
  echo "fuzz: 0 passed, 1 failed"
  exit 1
fi
mapfile -t all_targets <"$out/fuzz/targets.txt"
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")

# Seeds: committed ones, fixtures, and those made by the code they feed.
seeds=$out/seeds
rm -rf "$seeds" && mkdir -p "$seeds"
"$bin/rematlab-fuzz-seeds" "$seeds" || { echo "fuzz: rematlab-fuzz-seeds failed"; echo "fuzz: 0 passed, 1 failed"; exit 1; }
mkdir -p "$seeds/model_config" "$seeds/schedule"
cp resources/presets/*.json fuzz/corpus/hf_config/* "$seeds/model_config/"
cp tests/gui/data/cuda-tiny-offload/schedule.json "$seeds/schedule/fixture-schedule.json"
i=0
for f in summary.json schedule.json memory_events.csv memory_timeline.csv ops.csv schedule.csv ledger.csv loss.csv; do
  src=tests/gui/data/cuda-tiny-offload/$f
  [ -f "$src" ] && { printf "\\x$(printf %02x $i)"; cat "$src"; } >"$seeds/run_dir/fixture-$i-$f"
  i=$((i + 1))
done

# The gist of a sanitizer or libFuzzer report: what happened, and the stack frames in our code.
report() {
  grep -E "runtime error|terminate called|what\(\)|==ERROR|ERROR: libFuzzer|SUMMARY:|#[0-9]+ .*(core|fuzz|app)/[A-Za-z0-9_/]+\.(cpp|h)" "$1" |
    sed -E "s#[^ ]*/((core|fuzz|app)/)#\1#g; s/\(BuildId: [0-9a-f]+\)//" | cut -c1-240 | head -20 | sed 's/^/    /'
  echo "    (the whole report: $1)"
}

known=tests/fuzz-regressions/known-findings.txt
# One target: its regression inputs, then fuzzing; what it has to say goes to $out/fuzz-T.report,
# and the exit status says whether it passed.
run_target() {
  local t=$1 exe=$bin/fuzz_$1 ok=0 r rlog id note work artifacts log rc runs repro
  if [ ! -x "$exe" ]; then
    echo "fuzz: $t: no such target (targets: ${all_targets[*]})"
    return 1
  fi
  # 1. The regression inputs, one process each, so every one is reported.
  for r in tests/fuzz-regressions/"$t"/*; do
    [ -f "$r" ] || continue
    rlog="$out/replay-$t-$(basename "$r").log"
    if ! "$exe" "${limits[@]}" "$r" >"$rlog" 2>&1; then
      ok=1
      id="$t/$(basename "$r")"
      note=""
      grep -q "^$id\b" "$known" 2>/dev/null && note=" (a known finding awaiting its fix, $known)"
      echo "fuzz: $t: regression input $r fails$note:"
      report "$rlog"
      echo "    replay: $exe $r"
    fi
  done
  # 2. Fuzzing for a bounded time.
  work=$out/corpus/$t
  artifacts=$out/artifacts/$t
  mkdir -p "$work" "$artifacts"
  rm -f "$artifacts"/*
  local dirs=("$work") d
  for d in fuzz/corpus/"$t" "$seeds/$t"; do [ -d "$d" ] && dirs+=("$d"); done
  log=$out/fuzz-$t.log
  "$exe" "${limits[@]}" -max_total_time="$seconds" -print_final_stats=1 \
         -artifact_prefix="$artifacts/" "${dirs[@]}" >"$log" 2>&1
  rc=$?
  runs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$log" | grep -oE "[0-9]+$" | tail -1)
  if [ $rc -ne 0 ]; then
    ok=1
    repro=$(ls -t "$artifacts"/* 2>/dev/null | head -1)
    echo "fuzz: $t: FINDING after ${runs:-?} runs (exit $rc):"
    report "$log"
    if [ -n "$repro" ]; then
      echo "    reproducer: $repro"
      echo "    replay: $exe $repro"
      echo "    keep it: cp $repro tests/fuzz-regressions/$t/"
    fi
  else
    echo "fuzz: $t: ${runs:-?} runs in $seconds s, no finding"
  fi
  return $ok
}

# Side by side, at most $jobs at once; each target's lines are printed together, in order.
declare -A pid_of
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  run_target "$t" >"$out/fuzz-$t.report" 2>&1 &
  pid_of[$t]=$!
  running=$((running + 1))
done
passed=0
failed=0
for t in "${targets[@]}"; do
  if wait "${pid_of[$t]}"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  cat "$out/fuzz-$t.report"
done

echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
