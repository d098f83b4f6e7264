#!/usr/bin/env bash
# End-to-end check of the desktop app: start the real binary under Xvfb, run `tiny`, save a
# screenshot of the window after the run, and check the pixels of the memory plot in the PNG
# (check_screenshot.py): the stacked category fills are there, the curve reaches the peak at
# the height the axis puts it, and the curve has a shape; then a screenshot of the op timeline
# zoomed on a few ops, whose slices must each keep their own edges (check_op_timeline.py); then
# the saved run opened again with the memory timeline in its allocations view: several separate
# bands of several categories; then a run of several ranks on its Ranks page (check_screenshot.py
# --ranks).
#
# It also makes every screenshot docs/gui.md shows (1280x800, light theme) under OUT_DIR/docs,
# with a second run (uniform) for the Compare and Analysis pages and example recent runs for the
# start page, and checks that each image docs/gui.md references is committed under docs/images
# and was made (check_doc_images.py).
# With REMAT_DOC_SHOTS=DIR the made images are copied into DIR (scripts/update-doc-screenshots.sh
# sets it to docs/images), made smaller with ImageMagick's convert when it is installed.
#
#   tests/e2e/gui_screenshot.sh build/bin/rematlab [OUT_DIR]
set -euo pipefail
app=${1:?usage: gui_screenshot.sh path/to/rematlab [out-dir]}
out=${2:-$(mktemp -d)}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rm -rf "$out"
mkdir -p "$out/docs" "$out/home"
out=$(cd "$out" && pwd)
export QT_LOGGING_RULES="qt.qpa.*=false"
# Settings and recent runs of this test only: the start page lists none of the user's.
export XDG_CONFIG_HOME="$out/home/config" XDG_DATA_HOME="$out/home/data" XDG_CACHE_HOME="$out/home/cache"
shot() { xvfb-run -a -s "-screen 0 1600x1000x24" "$app" --timeout 240 "$@"; }
# The documentation's: 1280x800, light theme.
shoot() { shot --theme light --size 1280x800 "$@"; }

shot --run tiny --steps 1 --screenshot "$out/rematlab.png" --op-screenshot "$out/op_timeline.png" --runs-dir "$out/runs"
python3 "$here/check_screenshot.py" "$out/rematlab.png"
python3 "$here/check_op_timeline.py" "$out/op_timeline.png"
run_dir=$(dirname "$(find "$out/runs" -name summary.json | head -n 1)")
shot "$run_dir" --memory-view allocations --screenshot "$out/allocations.png"
python3 "$here/check_screenshot.py" --allocations "$out/allocations.png"

# The documentation's screenshots.
shoot "$run_dir" --screenshot "$out/docs/memory-timeline.png" --op-screenshot "$out/docs/op-timeline.png"
shoot "$run_dir" --memory-view allocations --screenshot "$out/docs/allocations.png"
# The start page as a user would see it: a home of its own whose settings list a few example runs
# (under ~/runs), not this test's directories.
doc_home="$out/home/doc-user"
mkdir -p "$doc_home/config/RematLab"
printf '[General]\nrecentRuns=%s, %s, %s\n' "$doc_home/runs/small-selective" "$doc_home/runs/small-none" \
  "$doc_home/runs/sweep-tiny" > "$doc_home/config/RematLab/rematlab.conf"
HOME="$doc_home" XDG_CONFIG_HOME="$doc_home/config" shoot --screenshot "$out/docs/start-page.png" --runs-dir "$doc_home/runs"
shoot --run tiny --policy uniform:segments=2 --steps 1 --screenshot "$out/uniform.png" --runs-dir "$out/runs-uniform"
uniform_dir=$(dirname "$(find "$out/runs-uniform" -name summary.json | head -n 1)")
shoot "$run_dir" "$uniform_dir" --page compare --screenshot "$out/docs/compare.png"
shoot "$run_dir" "$uniform_dir" --page analysis --screenshot "$out/docs/analysis.png"
shoot "$run_dir" "$uniform_dir" --page diff --screenshot "$out/docs/diff.png"
# A run of several ranks (the committed tp 2 sp fixture): the Ranks page, every rank's peak and
# its ops and collectives on their own rows.
shoot "$root/tests/data/ranks-v3" --page ranks --screenshot "$out/docs/ranks.png"
python3 "$here/check_screenshot.py" --ranks "$out/docs/ranks.png"
if [[ -n "${REMAT_DOC_SHOTS:-}" ]]; then
  mkdir -p "$REMAT_DOC_SHOTS"
  for f in "$out"/docs/*.png; do
    dest="$REMAT_DOC_SHOTS/$(basename "$f")"
    if command -v convert > /dev/null; then
      convert "$f" -strip +dither -colors 256 "PNG8:$dest"
    else
      cp "$f" "$dest"
    fi
  done
  echo "gui_screenshot.sh: the documentation's screenshots written to $REMAT_DOC_SHOTS"
fi
python3 "$here/check_doc_images.py" --doc "$root/docs/gui.md" --made "$out/docs"
