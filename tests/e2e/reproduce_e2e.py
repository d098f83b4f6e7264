"""Reproducible from outside: a run trains on given token ids (--tokens, .npy or raw), says which
tokens each step used (--dump-batch), takes AdamW's settings as options, and reads and writes its
weights as one safetensors file or as Hugging Face's shards under an index. Python standard
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


read_safetensors = e2e_common.read_safetensors


def check_saved_grads(b, w, npy):
    """--save-grads writes the step's gradients under the weights' names: one AdamW step from w0
    without decay moves each weight by lr * g / (|g| + eps) (bias-corrected moments at t = 1)."""
    w0, w1, g = (os.path.join(w, n) for n in ("w0.safetensors", "w1.safetensors", "g.safetensors"))
    one = ["run", "--model", "tiny", "--dtype", "fp32", "--steps", "1", "--warmup", "0", "--tokens", npy]
    b.run(*one, "--save-weights", w0)
    lr, eps = 1e-3, 1e-8
    b.run(*one, "--load-weights", w0, "--save-weights", w1, "--save-grads", g, "--weight-decay", "0",
          "--lr", str(lr), "--eps", str(eps))
    before, after, grads = read_safetensors(w0), read_safetensors(w1), read_safetensors(g)
    check(sorted(grads) == sorted(before), "the gradients carry the weights' names")
    worst, nonzero = 0.0, 0
    for name, (shape, gv) in grads.items():
        check(shape == before[name][0], "%s: gradient shape %r = weight shape" % (name, shape))
        for x0, x1, gx in zip(before[name][1], after[name][1], gv):
            step = lr * gx / (abs(gx) + eps)
            worst = max(worst, abs((x0 - x1) - step))
            nonzero += gx != 0
    check(nonzero > 0, "the gradients are not all zero")
    # fp32 rounding of weights near 0.02 with steps near 1e-3.
    check(worst < 1e-6, "one AdamW step moves each weight by lr g / (|g| + eps): worst deviation %g" % worst)


def write_safetensors(path, tensors):
    """Writes {name: (shape, values)} as an F32 safetensors file, the header padded to 8 bytes."""
    header, off = {}, 0
    for name, (shape, values) in tensors.items():
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + 4 * len(values)]}
        off += 4 * len(values)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for shape, values in tensors.values():
            f.write(struct.pack("<%df" % len(values), *values))


def check_sharded_weights(b, w, npy):
    """--save-shard-size writes Hugging Face's sharded layout holding the one file's tensors;
    --load-weights reads an index or its directory, also one written here, to the same run; an index
    at odds with its shards is refused naming the file."""
    one = ["run", "--model", "tiny", "--dtype", "fp32", "--steps", "1", "--warmup", "0", "--tokens", npy]
    w0, sharded = os.path.join(w, "s0.safetensors"), os.path.join(w, "s0")
    b.run(*one, "--save-weights", w0)
    b.run(*one, "--save-weights", sharded, "--save-shard-size", "300KB")
    tensors, n = e2e_common.read_sharded_safetensors(sharded)
    check(n > 2, "300KB shards of tiny are several: %d" % n)
    check(tensors == read_safetensors(w0), "the shards hold the one file's tensors")
    # A sharded checkpoint written here, two shards split at the middle.
    ours = os.path.join(w, "ours")
    os.mkdir(ours)
    names = sorted(tensors)
    halves = {"a.safetensors": names[:len(names) // 2], "b.safetensors": names[len(names) // 2:]}
    for shard, part in halves.items():
        write_safetensors(os.path.join(ours, shard), {k: tensors[k] for k in part})
    index = {"metadata": {"total_size": sum(4 * len(v) for _, v in tensors.values())},
             "weight_map": {k: s for s, part in halves.items() for k in part}}
    ours_index = os.path.join(ours, "model.safetensors.index.json")
    with open(ours_index, "w") as f:
        json.dump(index, f)
    base = b.json(*one, "--load-weights", w0, "--json")
    for src in (sharded, os.path.join(sharded, "model.safetensors.index.json"), ours):
        s = b.json(*one, "--load-weights", src, "--json")
        if base and s:
            check((s["loss"], s["grad_checksum"]) == (base["loss"], base["grad_checksum"]),
                  "a run from %s is the run from the one file" % src)
    index["weight_map"][names[0]] = "c.safetensors"
    with open(ours_index, "w") as f:
        json.dump(index, f)
    b.refuses([*one, "--load-weights", ours], ours_index, "c.safetensors", "missing")
    os.remove(ours_index)
    b.refuses([*one, "--load-weights", ours], "holds neither")
    b.refuses([*one, "--load-weights", w0, "--save-weights", os.path.join(w, "x"), "--save-shard-size", "0"],
              "save-shard-size")
    both = os.path.join(w, "both")
    b.refuses([*one, "--save-weights", both, "--save-shard-size", "1MB", "--out", both + "/"], "--out and --save-weights")
    check(not os.path.exists(both), "a refused run wrote nothing at %s" % both)


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
        check_saved_grads(b, w, npy)
        check_sharded_weights(b, w, npy)
        b.refuses(["run", "--model", "tiny", "--tokens", npy, "--corpus", raw], "excludes")
        b.refuses(["run", "--model", "tiny", "--beta2", "1"], "beta2")
        b.refuses(["run", "--model", "tiny", "--tokens", raw, "--tokens-dtype", "f32"], "tokens-dtype", "u16")
    finally:
        shutil.rmtree(w, ignore_errors=True)
    return e2e_common.exit_code("runs are reproducible from outside")


if __name__ == "__main__":
    sys.exit(main())
