#!/usr/bin/env python3
"""End-to-end test of weights and gradient files with tensor-parallel, pipeline and ZeRO ranks
(`run --tp T [--sp] [--pp P] [--dp D --zero K] --save-weights/--save-grads/--load-weights`, one file
or shards under an index), on the CPU in fp32. The files are the one-process format: rank 0 writes the whole model's tensors
under their Hugging Face names, the other ranks' slices, stages and shards gathered to it; every
rank takes its own pieces of a loaded file.

Saving, bit for bit:
* The initial weights: with --lr 1e-30 an AdamW step moves no weight of a bias-free model
  (llama-tiny; its update of about 1e-30 is far below half an ulp of every weight, its norm
  weights are 1), so the saved file is the initialization. A one-process run and T = 2,
  T = 2 sp x D = 2 ZeRO-3, T = 2 x D = 2 ZeRO-2 and D = 2 ZeRO-3 write the same bytes, because
  every rank holds bitwise slices or shards of the one-process initialization; so do P = 2 and
  P = 2 x T = 2 x D = 2 ZeRO-3 (each stage's parameters drawn alone).
* After steps, at D = 2: ZeRO-1, 2 and 3 give ZeRO-0's losses bit for bit (zero_e2e.py), and
  their weights and the gradients the optimizer read (gathered from the shards) are ZeRO-0's
  bytes too; with T = 2 as well, ZeRO-3's files are ZeRO-0's; with P = 2 stages (the tied word
  embedding's two copies, stage 0's written), ZeRO-1's are ZeRO-0's.

Gradients against one process (--warmup 0 --steps 1: the gradients of the initial weights):
every tensor of a T = 2 run's --save-grads (and of P = 2, P = 2 x D = 2 ZeRO-2: micro-batch
sums, well inside it) is within the tensor-parallel bound of
tensor_parallel_e2e.py of the one-process tensor, norm-wise: ||g_T - g_1|| <= 2 * n_lin *
gamma_Kmax * ||g_1||, n_lin = 4 * layers, gamma_K = K * 2^-24 (measured: 1e-6 and less). A
slice put in the wrong place, a rank's copy of a split weight missing, or QK-norm's statistic
taken over one rank's heads instead of the whole width (small-OLMo's q_norm and k_norm
gradients) are off by 1e-2 and more.

Loading: a one-process file after two steps (not the initialization) loaded by a one-process
run, T = 2, T = 2 sp x D = 2 ZeRO-3, D = 2 ZeRO-3, P = 2 and P = 2 x T = 2 x D = 2 ZeRO-3 gives
the one-process first loss within the
same bound (D = 2 ZeRO-3 equal to D = 2 ZeRO-0 bit for bit), and not the loss of the seed's
initialization.
Python standard library only.
"""
import argparse
import json
import math
import os
import sys
import tempfile

import e2e_common
from e2e_common import check

U32 = 2.0 ** -24

OLMO2_SMALL = {"name": "olmo2-small", "architecture": "olmo2", "layers": 2, "hidden": 64, "heads": 4,
               "kv_heads": 2, "ffn": 128, "seq": 32, "batch": 4, "vocab": 256, "dropout": 0.0,
               "attention": "naive", "dtype": "fp32"}


def bound(layers, kmax):
    return 2 * 4 * layers * kmax * U32


def base(model, seed=5):
    return ["--model", model, "--dtype", "fp32", "--seed", seed, "--threads", "2"]


def load_json(path):
    with open(path) as f:
        return json.load(f)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class Runs:
    def __init__(self, b, tmp):
        self.b, self.tmp, self.n = b, tmp, 0

    def run(self, args, layout=(), files=()):
        """Runs; returns (first loss, {flag: path} of the files asked for)."""
        self.n += 1
        out = os.path.join(self.tmp, "run-%d" % self.n)
        paths = {f: os.path.join(self.tmp, "run-%d%s.safetensors" % (self.n, f)) for f in files}
        extra = []
        for f, p in paths.items():
            extra += [f, p]
        self.b.run("run", *args, *layout, *extra, "--out", out)
        summary = os.path.join(out, "ranks.json" if layout else "summary.json")
        if not check(os.path.isfile(summary), "%s %s: no %s" % (" ".join(map(str, args)), layout, summary)):
            return None, paths
        j = load_json(summary)
        check(j.get("complete", True), "%s %s: complete: %r" % (args, layout, j.get("error")))
        for f, p in paths.items():
            check(os.path.isfile(p), "%s %s: %s wrote %s" % (args, layout, f, p))
        if layout:
            for r in j["ranks"]:
                check(r["peak_bytes"] == r["predicted_peak_bytes"], "%s rank %d: peak %d == predicted %d"
                      % (layout, r["rank"], r["peak_bytes"], r["predicted_peak_bytes"]))
            others = [n for n in os.listdir(self.tmp) if n.startswith("run-%d" % self.n) and ".partial" in n]
            check(not others, "%s: no partial files left: %r" % (layout, others))
        losses = j.get("warmup_loss", []) + j.get("loss", [])
        return (losses[0] if losses else None), paths


def same_bytes(a, b, what):
    check(os.path.isfile(a) and os.path.isfile(b) and read_bytes(a) == read_bytes(b),
          "%s: the file has the one-layout file's bytes" % what)


def grads_within(ref, got, rel, what, names=None):
    r, g = e2e_common.read_safetensors(ref), e2e_common.read_safetensors(got)
    check(sorted(r) == sorted(g), "%s: the same tensors as one process" % what)
    worst = 0.0
    for name in names or sorted(r):
        if name not in g:
            check(False, "%s: no tensor %s" % (what, name))
            continue
        (rs, rv), (gs, gv) = r[name], g[name]
        check(rs == gs, "%s: %s has shape %r, one process %r" % (what, name, gs, rs))
        diff = math.sqrt(sum((x - y) ** 2 for x, y in zip(rv, gv)))
        size = math.sqrt(sum(x * x for x in rv))
        check(diff <= rel * size, "%s: %s differs by %g of its norm %g, bound %g" % (what, name, diff / size, size, rel))
        worst = max(worst, diff / size if size else diff)
    return worst


def initial_weights(runs):
    args = [*base("llama-tiny"), "--lr", "1e-30", "--warmup", "0", "--steps", "1"]
    _, one = runs.run(args, files=["--save-weights"])
    for layout in (["--tp", 2], ["--tp", 2, "--sp", "--dp", 2, "--zero", 3], ["--tp", 2, "--dp", 2, "--zero", 2],
                   ["--dp", 2, "--zero", 3], ["--pp", 2], ["--pp", 2, "--tp", 2, "--dp", 2, "--zero", 3]):
        _, files = runs.run(args, layout, ["--save-weights"])
        same_bytes(files["--save-weights"], one["--save-weights"], "initial weights %r" % layout)


def zero_after_steps(runs):
    args = [*base("tiny"), "--warmup", "1", "--steps", "2"]
    for tp in ([], ["--tp", 2], ["--pp", 2]):
        _, z0 = runs.run(args, [*tp, "--dp", 2], ["--save-weights", "--save-grads"])
        # Stages sum a ZeRO-2 gradient per micro-batch, in another order than ZeRO-0: ZeRO-1 only.
        for zero in ((1, 2, 3) if not tp else (3,) if tp[0] == "--tp" else (1,)):
            _, z = runs.run(args, [*tp, "--dp", 2, "--zero", zero], ["--save-weights", "--save-grads"])
            for f in ("--save-weights", "--save-grads"):
                same_bytes(z[f], z0[f], "%s ZeRO-%d D=2 %s after 2 steps" % (" ".join(map(str, tp)), zero, f))


def grads_against_one(runs, model, rel, layouts, names_of=None):
    args = [*base(model), "--warmup", "0", "--steps", "1"]
    _, one = runs.run(args, files=["--save-grads"])
    worst = 0.0
    for layout in layouts:
        _, files = runs.run(args, layout, ["--save-grads"])
        names = names_of(e2e_common.read_safetensors(one["--save-grads"])) if names_of else None
        worst = max(worst, grads_within(one["--save-grads"], files["--save-grads"], rel,
                                        "%s %r gradients" % (model, layout), names))
    return worst


def loading(runs):
    rel = bound(4, 512)
    _, trained = runs.run([*base("tiny"), "--warmup", "0", "--steps", "2"], files=["--save-weights"])
    w = trained["--save-weights"]
    args = [*base("tiny", seed=7), "--warmup", "0", "--steps", "1"]
    fresh, _ = runs.run(args)
    one, _ = runs.run([*args, "--load-weights", w])
    check(one is not None and abs(one - fresh) > 1e-2,
          "the loaded file's loss %r is not the seed's initialization's %r" % (one, fresh))
    got = {}
    for layout in (["--tp", 2], ["--tp", 2, "--sp", "--dp", 2, "--zero", 3], ["--dp", 2, "--zero", 3], ["--dp", 2],
                   ["--pp", 2], ["--pp", 2, "--tp", 2, "--dp", 2, "--zero", 3]):
        loss, _ = runs.run([*args, "--load-weights", w], layout)
        got[tuple(layout)] = loss
        check(loss is not None and one is not None and abs(loss - one) <= rel * abs(one),
              "loading into %r: first loss %r vs one process %r, bound %g" % (layout, loss, one, rel))
    check(got[("--dp", 2, "--zero", 3)] == got[("--dp", 2)],
          "loading into D=2 ZeRO-3: the first loss is ZeRO-0's bit for bit: %r %r"
          % (got[("--dp", 2, "--zero", 3)], got[("--dp", 2)]))
    # Shards under an index: ranks read them as they read the one file, and rank 0 writes them
    # holding the one file's tensors.
    shards = os.path.join(runs.tmp, "trained-shards")
    runs.b.run("run", *base("tiny"), "--warmup", "0", "--steps", "2", "--save-weights", shards,
               "--save-shard-size", "300KB")
    tensors, n = e2e_common.read_sharded_safetensors(shards)
    check(n > 2 and tensors == e2e_common.read_safetensors(w), "the shards hold the trained file's tensors")
    deepest = ("--pp", 2, "--tp", 2, "--dp", 2, "--zero", 3)
    loss, _ = runs.run([*args, "--load-weights", shards], deepest)
    check(loss == got[deepest], "loading shards into %r: first loss %r, from the one file %r" % (deepest, loss, got[deepest]))
    _, one_file = runs.run([*args, "--load-weights", w], ["--dp", 2, "--zero", 3], ["--save-weights"])
    saved = os.path.join(runs.tmp, "zero3-shards")
    runs.b.run("run", *args, "--load-weights", shards, "--dp", 2, "--zero", 3, "--save-weights", saved,
               "--save-shard-size", "300KB", "--out", os.path.join(runs.tmp, "zero3-shards-run"))
    tensors, _ = e2e_common.read_sharded_safetensors(saved)
    check(tensors == e2e_common.read_safetensors(one_file["--save-weights"]),
          "D=2 ZeRO-3 writes shards holding the tensors of its one file")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    b = e2e_common.Batch(a.bin)
    with tempfile.TemporaryDirectory() as tmp:
        runs = Runs(b, tmp)
        initial_weights(runs)
        zero_after_steps(runs)
        worst = grads_against_one(runs, "tiny", bound(4, 512), (["--tp", 2], ["--tp", 2, "--sp", "--dp", 2, "--zero", 2],
                                                                ["--pp", 2], ["--pp", 2, "--dp", 2, "--zero", 2]))
        olmo = os.path.join(tmp, "olmo2-small.json")
        with open(olmo, "w") as f:
            json.dump(OLMO2_SMALL, f)
        qk = lambda names: [n for n in names if "q_norm" in n or "k_norm" in n]
        worst_qk = grads_against_one(runs, olmo, bound(2, 128), (["--tp", 2], ["--tp", 2, "--sp"]))
        grads_against_one(runs, olmo, bound(2, 128), (["--tp", 2, "--dp", 2, "--zero", 3],), qk)
        # Qwen3's per-head QK-norm weights are whole on each rank, each rank's heads adding to them.
        qwen = os.path.join(tmp, "qwen3-small.json")
        with open(qwen, "w") as f:
            json.dump(dict(OLMO2_SMALL, name="qwen3-small", architecture="qwen3", head_dim=32), f)
        worst_qwen = grads_against_one(runs, qwen, bound(2, 128), (["--tp", 2], ["--tp", 2, "--sp"]), qk)
        loading(runs)
        print("gradients against one process, worst relative difference: tiny T=2 %.3g, olmo2-small T=2 %.3g, "
              "qwen3-small's QK-norm T=2 %.3g" % (worst, worst_qk, worst_qwen))
    return e2e_common.exit_code("weights files of tensor-parallel and ZeRO ranks ok")


if __name__ == "__main__":
    sys.exit(main())
