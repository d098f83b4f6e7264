#!/usr/bin/env bash
# The unit and end-to-end tests under AddressSanitizer + UndefinedBehaviorSanitizer: the
# `sanitize` preset (clang at -O1 with debug info, CUDA and the desktop app off) in
# build-sanitize/, then ctest -L 'unit|e2e' (the installed-copy e2e run is left out: it runs the
# same checks as e2e_batch_build; so is e2e_predict, whose Python extension pip builds without
# the sanitizers). The same build holds the fuzz targets (scripts/fuzz.sh). Any
# sanitizer report aborts the test it happens in, so it fails.
# Without clang and its sanitizer runtimes the stage cannot run: it says so in one line and exits
# 77, which scripts/test.sh reports as a skipped stage.
# Usage: scripts/sanitize.sh [more ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${REMAT_BUILD_JOBS:-$(nproc)}"

if ! why=$(scripts/clang-check.sh); then
  echo "sanitize: skipped: $why"
  exit 77
fi
cmake --preset sanitize >/dev/null
cmake --build build-sanitize -j "$jobs" --target remat_unit_tests rematlab-batch

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
ctest --test-dir build-sanitize --output-on-failure --timeout 900 -j "$jobs" -L 'unit|e2e' -E '^(e2e_batch_installed|e2e_predict)$' "$@"
