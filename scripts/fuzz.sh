#!/usr/bin/env bash
# Builds the `fuzz` preset (clang, libFuzzer, ASan + UBSan; the core library and fuzz/ only, in
# build-fuzz/) and runs each fuzz target: first over its regression inputs
# (tests/fuzz-regressions/TARGET/), then fuzzing for SECONDS from its seeds (fuzz/corpus/TARGET,
# the fixtures and what rematlab-fuzz-seeds writes). Exits non-zero on any finding, printing the
# sanitizer report, the reproducer and how to keep it as a regression input. docs/testing.md.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]     (default: 30 seconds each, every target)
set -uo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
shift || true
all_targets=(model_config hf_config schedule safetensors run_dir sweep torch_snapshot)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")
command -v ccache >/dev/null && export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
jobs="${REMAT_BUILD_JOBS:-$(nproc)}"
out=build-fuzz
bin=$out/bin
limits=(-rss_limit_mb=2048 -timeout=10)
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"

if ! { cmake --preset fuzz >/dev/null && cmake --build $out -j "$jobs"; }; then
  echo "fuzz: the fuzz build failed"
  echo "fuzz: 0 passed, ${#targets[@]} failed"
  exit 1
fi

# Seeds: committed ones, fixtures, and those made by the code they feed.
seeds=$out/seeds
rm -rf "$seeds" && mkdir -p "$seeds"
"$bin/rematlab-fuzz-seeds" "$seeds" || { echo "fuzz: rematlab-fuzz-seeds failed"; exit 1; }
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
  grep -E "runtime error|terminate called|what\(\)|==ERROR|ERROR: libFuzzer|SUMMARY:|#[0-9]+ .* $PWD/(core|fuzz|app)/" "$1" |
    sed -E "s|$PWD/||g; s/\(BuildId: [0-9a-f]+\)//" | cut -c1-240 | head -20 | sed 's/^/    /'
  echo "    (the whole report: $1)"
}

known=tests/fuzz-regressions/known-findings.txt
passed=0
failed=0
for t in "${targets[@]}"; do
  exe=$bin/fuzz_$t
  if [ ! -x "$exe" ]; then
    echo "fuzz: $t: no such target (targets: ${all_targets[*]})"
    failed=$((failed + 1))
    continue
  fi
  ok=1
  # 1. The regression inputs, one process each, so every one is reported.
  for r in tests/fuzz-regressions/"$t"/*; do
    [ -f "$r" ] || continue
    rlog="$out/replay-$t-$(basename "$r").log"
    if ! "$exe" "${limits[@]}" "$r" >"$rlog" 2>&1; then
      ok=0
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
  dirs=("$work")
  for d in fuzz/corpus/"$t" "$seeds/$t"; do [ -d "$d" ] && dirs+=("$d"); done
  log=$out/fuzz-$t.log
  "$exe" "${limits[@]}" -max_total_time="$seconds" -print_final_stats=1 \
         -artifact_prefix="$artifacts/" "${dirs[@]}" >"$log" 2>&1
  rc=$?
  runs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$log" | grep -oE "[0-9]+$" | tail -1)
  if [ $rc -ne 0 ]; then
    ok=0
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
  if [ $ok -eq 1 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done

echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
