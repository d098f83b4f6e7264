#!/usr/bin/env bash
# The unit and end-to-end tests under AddressSanitizer + UndefinedBehaviorSanitizer: the `asan`
# preset (Debug, CUDA and the desktop app off) in build-asan/, then ctest -L 'unit|e2e' (the
# installed-copy e2e run is left out: it runs the same checks as e2e_batch_build). Any sanitizer
# report aborts the test it happens in, so it fails.
# Usage: scripts/sanitize.sh [more ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v ccache >/dev/null && export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
jobs="${REMAT_BUILD_JOBS:-$(nproc)}"

cmake --preset asan >/dev/null
cmake --build build-asan -j "$jobs" --target remat_unit_tests rematlab-batch

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
ctest --test-dir build-asan --output-on-failure -j "$jobs" -L 'unit|e2e' -E '^e2e_batch_installed$' "$@"
