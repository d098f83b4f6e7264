#!/usr/bin/env bash
# Sets everything up and runs the main job: the desktop app where there is a display,
# otherwise a headless comparison of every policy on the default model on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh run
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -x build/bin/rematlab ]; then
  exec build/bin/rematlab "$@"
fi
out="$(mktemp -d -t rematlab-sweep.XXXXXX)"
exec build/bin/rematlab-batch sweep --model tiny --out "$out/sweep" "$@"
