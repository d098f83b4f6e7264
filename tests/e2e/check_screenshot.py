#!/usr/bin/env python3
"""Checks the desktop app's screenshot: the memory plot area (from <png>.json, written by the
app next to the PNG) must hold the stacked memory curve.

- a large share of the plot area is painted in the category fill colors, with several
  categories (parameters, gradients, ... saved activations) present;
- the top of the colored stack reaches, within a few pixels, the height at which the axis puts
  the measured peak (plotted_max_bytes / value_axis_max of the plot height);
- the top of the stack varies over time (the curve has a shape, not a flat block);
- the red peak marker is drawn.

With --allocations (the memory timeline's allocations view, one band per allocation):
- a share of the plot area is painted in the category colors, with several categories present;
- some columns cross several separate bands (runs of category color split by a band's outline
  or a change of color), of at least three different colors;
- some column crosses eight bands of one color (several allocations of one category, which the
  stacked categories never draw: there a column crosses a category once, split at most by the
  lines drawn over it).

With --ranks (the Ranks page of a run of several ranks; the JSON has where its plots and rows are):
- each rank's comm row of the stacked timelines holds bars of the collectives' color and none
  of a phase's, each rank's op row bars of the phases' colors and none of the collectives';
- the peak plot holds one measured bar per rank.

Python standard library only: a small PNG decoder (8-bit RGB / RGBA, no interlace).
"""
import json
import struct
import sys
import zlib

# theme.cpp: category_color()
CATEGORIES = {
    "parameters": (0x4E, 0x79, 0xA7),
    "gradients": (0xF2, 0x8E, 0x2B),
    "master_weights": (0x76, 0xB7, 0xB2),
    "optimizer_state": (0x59, 0xA1, 0x4F),
    "saved_activations": (0xED, 0xC9, 0x48),
    "checkpoints": (0xB0, 0x7A, 0xA1),
    "recompute_temps": (0xFF, 0x9D, 0xA7),
    "activation_grads": (0xE1, 0x57, 0x59),
    "logits_loss": (0x9C, 0x75, 0x5F),
    "workspace": (0xBA, 0xB0, 0xAC),
}
PEAK_RED = (0xD6, 0x27, 0x28)
# app/gui/theme.cpp phase_color, and the measured bars of the Ranks page (ranks_peak_chart.cpp).
PHASES = {"init": (0x8C, 0x8C, 0x8C), "forward": (0x4E, 0x79, 0xA7), "recompute": (0xF2, 0x8E, 0x2B),
          "backward": (0xE1, 0x57, 0x59), "optimizer": (0x59, 0xA1, 0x4F)}
MEASURED_BLUE = (0x2E, 0x86, 0xC1)


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                raise SystemExit(f"{path}: unsupported PNG (depth {depth}, color type {ctype}, interlace {interlace})")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        f = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        if f == 1:
            for x in range(bpp, stride):
                line[x] = (line[x] + line[x - bpp]) & 0xFF
        elif f == 2:
            for x in range(stride):
                line[x] = (line[x] + prev[x]) & 0xFF
        elif f == 3:
            for x in range(stride):
                left = line[x - bpp] if x >= bpp else 0
                line[x] = (line[x] + ((left + prev[x]) >> 1)) & 0xFF
        elif f == 4:
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                b = prev[x]
                c = prev[x - bpp] if x >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def plot_area(png):
    meta = json.load(open(png + ".json"))
    width, height, bpp, rows = read_png(png)
    x0, y0, w, h = meta["x"], meta["y"], meta["width"], meta["height"]
    assert 0 <= x0 and 0 <= y0 and x0 + w <= width and y0 + h <= height, (meta, width, height)
    assert w > 300 and h > 150, f"plot area too small: {w}x{h}"
    return meta, bpp, rows, x0, y0, w, h


def check_allocations(png):
    _, bpp, rows, x0, y0, w, h = plot_area(png)
    colors = {v: k for k, v in CATEGORIES.items()}
    counts = {k: 0 for k in CATEGORIES}
    best_bands, best_colors, columns_with_bands, best_same = 0, 0, 0, 0
    for x in range(x0, x0 + w):
        bands, prev, band_colors, per_color = 0, None, set(), {}
        run = 0
        for y in range(y0, y0 + h):
            px = tuple(rows[y][x * bpp:x * bpp + 3])
            name = colors.get(px)
            if name:
                counts[name] += 1
            if name and name == prev:
                run += 1
                if run == 2:  # a band at least two pixels high
                    bands += 1
                    band_colors.add(name)
                    per_color[name] = per_color.get(name, 0) + 1
            else:
                run = 1 if name else 0
            prev = name
        if bands >= 4:
            columns_with_bands += 1
        best_same = max([best_same] + list(per_color.values()))
        if bands > best_bands:
            best_bands, best_colors = bands, len(band_colors)
    area = w * h
    colored = sum(counts.values())
    present = sorted(k for k, v in counts.items() if v >= 200)
    print(f"plot area {w}x{h}: {colored / area:.1%} in category colors; present: {', '.join(present)}; "
          f"at most {best_bands} bands of {best_colors} colors in a column, {best_same} of one color; "
          f"{columns_with_bands} columns cross 4+ bands")
    failures = []
    if colored < 0.15 * area:
        failures.append(f"only {colored / area:.1%} of the plot area shows allocations")
    if len(present) < 3:
        failures.append(f"only {len(present)} categories drawn: {present}")
    if best_bands < 5 or best_colors < 3:
        failures.append(f"no column crosses 5 bands of 3 colors (best: {best_bands} bands, {best_colors} colors)")
    if best_same < 8:
        failures.append(f"no column crosses 8 bands of one category (best: {best_same})")
    if columns_with_bands < 0.2 * w:
        failures.append(f"only {columns_with_bands} of {w} columns cross 4 or more bands")
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("OK: the allocations view shows separate bands of several categories")
    return 0


def check_ranks(png):
    """The Ranks page of a run of several ranks: in the stacked timelines every rank's comm row
    holds bars of the collectives' color, its op row bars of the phases' colors and none of the
    collectives' color; the peak plot holds one bar cluster per rank."""
    meta = json.load(open(png + ".json"))
    width, height, bpp, rows = read_png(png)
    r = meta.get("ranks")
    if not r:
        print("FAIL: the screenshot is not of the Ranks page (no 'ranks' in its JSON)")
        return 1
    tl, comm = r["timeline"], tuple(r["comm_color"])
    phases = set(PHASES.values())
    failures = []
    for row in r["rows"]:
        top, bottom = max(row["top"], tl["y"]), min(row["bottom"], tl["y"] + tl["height"])
        n_comm = n_phase = 0
        for y in range(top, bottom + 1):
            line = rows[y]
            for x in range(tl["x"], tl["x"] + tl["width"]):
                px = tuple(line[x * bpp:x * bpp + 3])
                n_comm += px == comm
                n_phase += px in phases
        what = "rank %d %s row" % (row["rank"], row["stream"])
        print(f"{what}: {n_comm} px of collectives, {n_phase} px of phases")
        if row["stream"] == "comm" and (n_comm < 100 or n_phase > 0):
            failures.append(f"{what}: {n_comm} px of collectives, {n_phase} of phases")
        if row["stream"] != "comm" and (n_phase < 100 or n_comm > 0):
            failures.append(f"{what}: {n_phase} px of phases, {n_comm} of collectives")
    if len(r["rows"]) != 2 * r["ranks"]:
        failures.append(f"{len(r['rows'])} rows for {r['ranks']} ranks")
    pk = r["peaks"]
    mid = pk["y"] + pk["height"] - 3  # just above the axis: every bar crosses it
    line, clusters, inside = rows[mid], 0, False
    for x in range(pk["x"], pk["x"] + pk["width"]):
        on = tuple(line[x * bpp:x * bpp + 3]) == MEASURED_BLUE
        clusters += on and not inside
        inside = on
    print(f"peak plot: {clusters} measured bars")
    if clusters != r["ranks"]:
        failures.append(f"{clusters} measured bars for {r['ranks']} ranks")
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("OK: the Ranks page shows every rank's peak and its ops and collectives on their own rows")
    return 0


def main():
    if sys.argv[1] == "--allocations":
        return check_allocations(sys.argv[2])
    if sys.argv[1] == "--ranks":
        return check_ranks(sys.argv[2])
    png = sys.argv[1]
    meta, bpp, rows, x0, y0, w, h = plot_area(png)
    colors = {v: k for k, v in CATEGORIES.items()}
    counts = {k: 0 for k in CATEGORIES}
    red = 0
    top = [None] * w  # the highest colored row per column
    for y in range(y0, y0 + h):
        row = rows[y]
        for x in range(x0, x0 + w):
            px = tuple(row[x * bpp:x * bpp + 3])
            name = colors.get(px)
            if name:
                counts[name] += 1
                if top[x - x0] is None:
                    top[x - x0] = y
            elif px == PEAK_RED:
                red += 1
    area = w * h
    colored = sum(counts.values())
    present = sorted(k for k, v in counts.items() if v >= 200)
    print(f"plot area {w}x{h} at ({x0},{y0}): {colored / area:.1%} in category colors; present: {', '.join(present)}")
    failures = []
    if colored < 0.25 * area:
        failures.append(f"only {colored / area:.1%} of the plot area shows the stacked memory")
    if len(present) < 4:
        failures.append(f"only {len(present)} categories drawn: {present}")
    tops = [t for t in top if t is not None]
    if len(tops) < 0.9 * w:
        failures.append(f"the curve covers {len(tops)} of {w} columns")
    if tops:
        highest = min(tops)
        expect = y0 + h * (1.0 - meta["plotted_max_bytes"] / meta["value_axis_max"])
        print(f"curve top at y={highest}, peak expected at y={expect:.1f}")
        if abs(highest - expect) > 4:
            failures.append(f"the curve's top is at y={highest}, the peak belongs at y={expect:.1f}")
        spread = max(tops) - min(tops)
        if spread < 0.05 * h:
            failures.append(f"the curve is flat (its top varies by {spread} px)")
    if meta.get("peak_bytes") != meta["plotted_max_bytes"]:
        failures.append(f"plotted maximum {meta['plotted_max_bytes']} is not the run's peak {meta.get('peak_bytes')}")
    if red < 10:
        failures.append("no peak marker")
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("OK: the memory plot shows the stacked curve up to the peak")
    return 0


if __name__ == "__main__":
    sys.exit(main())
