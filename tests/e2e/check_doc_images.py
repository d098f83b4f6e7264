#!/usr/bin/env python3
"""Checks the screenshots of docs/gui.md: every image the page references (images/NAME.png) is
committed under docs/images as a PNG of at most 1280x800, the committed images weigh less than
2 MiB together, and the screenshot test made each of them (--made DIR holds a PNG of that name,
so the images can always be made again by scripts/update-doc-screenshots.sh). The pixels of the
made and the committed images are not compared.

    check_doc_images.py --doc docs/gui.md --made OUT_DIR/docs

Python standard library only.
"""
import argparse
import os
import re
import struct
import sys

MAX_W, MAX_H = 1280, 800
MAX_TOTAL = 2 * 1024 * 1024


def png_size(path):
    """(width, height) from the PNG's IHDR, or None when the file is not a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--doc", required=True, help="docs/gui.md")
    ap.add_argument("--made", required=True, help="the directory the screenshot test wrote them to")
    args = ap.parse_args()
    with open(args.doc, encoding="utf-8") as f:
        text = f.read()
    refs = sorted(set(re.findall(r"!\[[^\]]*\]\((images/[^)\s]+\.png)\)", text)))
    problems = []
    if not refs:
        problems.append("%s references no images/*.png" % args.doc)
    docs_dir = os.path.dirname(os.path.abspath(args.doc))
    total = 0
    for ref in refs:
        committed = os.path.join(docs_dir, ref)
        name = os.path.basename(ref)
        if not os.path.isfile(committed):
            problems.append("%s: referenced by %s, not committed" % (committed, args.doc))
        else:
            total += os.path.getsize(committed)
            size = png_size(committed)
            if size is None:
                problems.append("%s: not a PNG" % committed)
            elif size[0] > MAX_W or size[1] > MAX_H:
                problems.append("%s: %dx%d, larger than %dx%d" % (committed, size[0], size[1], MAX_W, MAX_H))
        made = os.path.join(args.made, name)
        if not os.path.isfile(made) or png_size(made) is None:
            problems.append("%s: the screenshot test did not make it (no PNG %s)" % (name, made))
    made_names = sorted(n for n in os.listdir(args.made) if n.endswith(".png")) if os.path.isdir(args.made) else []
    for n in made_names:
        if "images/" + n not in refs:
            problems.append("%s: made by the screenshot test but not referenced by %s" % (n, args.doc))
    if total > MAX_TOTAL:
        problems.append("the referenced images weigh %d bytes, more than %d" % (total, MAX_TOTAL))
    for p in problems:
        print("check_doc_images: " + p, file=sys.stderr)
    if problems:
        return 1
    print("check_doc_images: %d images referenced, committed (%d bytes) and made" % (len(refs), total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
