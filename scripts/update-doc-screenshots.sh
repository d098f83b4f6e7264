#!/usr/bin/env bash
# Makes the screenshots docs/gui.md shows again, into docs/images: builds the desktop app and
# the policies, then runs the GUI screenshot test (tests/e2e/gui_screenshot.sh, which checks
# them too) with REMAT_DOC_SHOTS=docs/images. Needs xvfb-run; ImageMagick's convert, when
# installed, makes each PNG smaller (256 colors). Look at the images before committing them.
#
#   scripts/update-doc-screenshots.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cd "$root"
targets=(rematlab)
while read -r t; do targets+=("$t"); done < <(ninja -C "$build" -t targets all 2>/dev/null |
  sed -n 's/^\(remat_policy_[a-z_]*\):.*/\1/p' | sort -u)
cmake --build "$build" -j2 --target "${targets[@]}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
REMAT_DOC_SHOTS="$root/docs/images" tests/e2e/gui_screenshot.sh "$build/bin/rematlab" "$out/shots"
ls -l "$root/docs/images"
