"""Reproducible from outside: a run trains on given token ids (--tokens, .npy or raw), says which
tokens each step used (--dump-batch), and takes AdamW's settings as options. Python standard
library only."""
import argparse
import json
import os
import random
import shutil
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_common  # noqa: E402
from e2e_common import check  # noqa: E402


def write_npy(path, descr, fmt, values, shape):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode())
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


def read_npy_i32(path):
    with open(path, "rb") as f:
        data = f.read()
    check(data[:6] == b"\x93NUMPY", "the dumped batch is a .npy file")
    hlen = struct.unpack("<H", data[8:10])[0]
    header = data[10:10 + hlen].decode()
    check("'<i4'" in header, "the dumped batch holds int32: " + header)
    shape = tuple(int(x) for x in header.split("(")[1].split(")")[0].split(",") if x.strip())
    n = 1
    for s in shape:
        n *= s
    return shape, list(struct.unpack("<%di" % n, data[10 + hlen:10 + hlen + 4 * n]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    b = e2e_common.Batch(os.path.abspath(a.bin))
    w = tempfile.mkdtemp(prefix="rematlab-reproduce-")
    try:
        rng = random.Random(7)
        ids = [rng.randrange(256) for _ in range(3000)]
        npy = os.path.join(w, "tokens.npy")
        write_npy(npy, "<u2", "H", ids, "(%d,)" % len(ids))
        raw = os.path.join(w, "tokens.bin")
        with open(raw, "wb") as f:
            f.write(struct.pack("<%dI" % len(ids), *ids))
        dump = os.path.join(w, "batch.npy")
        base = ["run", "--model", "tiny", "--steps", "2", "--warmup", "1", "--json"]
        s1 = b.json(*base, "--tokens", npy, "--dump-batch", dump)
        s2 = b.json(*base, "--tokens", raw, "--tokens-dtype", "u32")
        if s1 and s2:
            check(s1["loss"] == s2["loss"], "the same tokens as .npy and as raw u32 give the same losses")
            check(s1["provenance"].get("data") == "tokens " + npy, "the run records its data: %r"
                  % s1["provenance"].get("data"))
        shape, rows = read_npy_i32(dump)
        model = s1["model"] if s1 else {"batch": 0, "seq": 0}
        check(shape == (3, model["batch"], model["seq"] + 1), "the dump is [steps, batch, seq + 1]: %r" % (shape,))
        width = model["seq"] + 1
        text = ",".join(map(str, ids))
        for r in range(len(rows) // width):
            row = rows[r * width:(r + 1) * width]
            check("," + ",".join(map(str, row)) + "," in "," + text + ",", "dumped row %d is a window of the tokens" % r)
        # AdamW's settings are options, and they act: decay changes the weights after a step,
        # not the first loss.
        d0 = b.json(*base, "--tokens", npy, "--weight-decay", "0")
        d1 = b.json(*base, "--tokens", npy, "--weight-decay", "0.5", "--beta1", "0.8", "--beta2", "0.99",
                    "--eps", "1e-6")
        if s1 and d0 and d1:
            check(d0["warmup_loss"] == s1["warmup_loss"] == d1["warmup_loss"], "the first loss does not depend on AdamW")
            check(d0["loss"] != s1["loss"] and d1["loss"] != s1["loss"], "AdamW's options change later losses")
        b.refuses(["run", "--model", "tiny", "--tokens", npy, "--corpus", raw], "excludes")
        b.refuses(["run", "--model", "tiny", "--beta2", "1"], "beta2")
        b.refuses(["run", "--model", "tiny", "--tokens", raw, "--tokens-dtype", "f32"], "tokens-dtype", "u16")
    finally:
        shutil.rmtree(w, ignore_errors=True)
    n = len(e2e_common.failures)
    print("%d failure(s)" % n if n else "runs are reproducible from outside")
    return 1 if n else 0


if __name__ == "__main__":
    sys.exit(main())
