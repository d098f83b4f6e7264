#!/usr/bin/env bash
# End-to-end check of the desktop app: start the real binary under Xvfb, run `tiny`, save a
# screenshot of the window after the run, and check the pixels of the memory plot in the PNG
# (check_screenshot.py): the stacked category fills are there, the curve reaches the peak at
# the height the axis puts it, and the curve has a shape; then a screenshot of the op timeline
# zoomed on a few ops, whose slices must each keep their own edges (check_op_timeline.py); then
# the saved run opened again with the memory timeline in its allocations view: several separate
# bands of several categories.
#
#   tests/e2e/gui_screenshot.sh build/bin/rematlab [OUT_DIR]
set -euo pipefail
app=${1:?usage: gui_screenshot.sh path/to/rematlab [out-dir]}
out=${2:-$(mktemp -d)}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$out"
mkdir -p "$out"
export QT_LOGGING_RULES="qt.qpa.*=false"
xvfb-run -a -s "-screen 0 1600x1000x24" \
  "$app" --run tiny --steps 1 --screenshot "$out/rematlab.png" --op-screenshot "$out/op_timeline.png" --runs-dir "$out/runs" --timeout 240
python3 "$here/check_screenshot.py" "$out/rematlab.png"
python3 "$here/check_op_timeline.py" "$out/op_timeline.png"
run_dir=$(dirname "$(find "$out/runs" -name summary.json | head -n 1)")
xvfb-run -a -s "-screen 0 1600x1000x24" \
  "$app" "$run_dir" --memory-view allocations --screenshot "$out/allocations.png" --timeout 240
python3 "$here/check_screenshot.py" --allocations "$out/allocations.png"
