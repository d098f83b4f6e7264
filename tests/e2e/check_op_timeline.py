#!/usr/bin/env python3
"""Checks the op timeline's screenshot (rematlab --op-screenshot): zoomed on a few ops, each op
slice wide enough keeps its own edges, so adjacent ops of one phase are separate bars.

Along a scan line just inside the top of the leaf (op) row — above any name drawn in a bar —
the phase-colored runs are counted: there must be at least one per op slice drawn on its own
(from <png>.json), each op's first column must be phase-colored and its last column not (the
gap before the next op). Python standard library only (check_screenshot.py's PNG reader).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_screenshot import read_png  # noqa: E402

# theme.cpp: phase_color()
PHASES = {(0x8C, 0x8C, 0x8C), (0x4E, 0x79, 0xA7), (0xF2, 0x8E, 0x2B), (0xE1, 0x57, 0x59), (0x59, 0xA1, 0x4F)}


def main():
    png = sys.argv[1]
    meta = json.load(open(png + ".json"))
    width, height, bpp, rows = read_png(png)
    x0, w = meta["x"], meta["width"]
    y = meta["bar_top"] + 1
    assert 0 <= y < height and x0 + w <= width, (meta, width, height)
    line = rows[y]
    colored = [tuple(line[x * bpp:x * bpp + 3]) in PHASES for x in range(width)]
    runs, x = 0, x0
    while x < x0 + w:
        if colored[x]:
            runs += 1
            while x < x0 + w and colored[x]:
                x += 1
        else:
            x += 1
    # Slices cut by the plot area's edges (an op running into the zoomed range), or starting on
    # its first column (where the axis line is drawn), have no edge of their own there to check.
    wide = [(a, b) for a, b in meta["leaf_slices"] if b - a >= 4 and a > x0 and b <= x0 + w]
    print(f"op row scan at y={y}: {runs} colored runs, {len(wide)} op slices at least 4 px wide")
    failures = []
    if len(wide) < 3:
        failures.append(f"only {len(wide)} op slices are wide enough to check")
    if runs < len(wide):
        failures.append(f"{runs} colored runs for {len(wide)} ops: adjacent ops merged")
    for a, b in wide:
        if not colored[a]:
            failures.append(f"op slice [{a}, {b}) does not start colored")
        if colored[b - 1]:
            failures.append(f"op slice [{a}, {b}) has no empty last column")
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("OK: every op slice has its own edges")
    return 0


if __name__ == "__main__":
    sys.exit(main())
