#!/usr/bin/env bash
# Sets everything up and runs every test (GPU tests skip with a message where there is no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
