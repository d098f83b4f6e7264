#!/usr/bin/env python3
"""End-to-end test of the routing a mixture of experts records and plans with, as a user would.

A small Qwen3-MoE config.json (one layer of 8 experts, top-2, one dense layer) runs a step with
--out on 2 threads: routing.csv has every expert of the sparse layer, its choices adding up to
tokens x 2.
`plan --routing-from RUN` plans the run's model, says it used the recorded routing, shows the
layer's busiest expert as the table has it, and under the run's policy predicts the run's peak
to the byte (planned on the run's lanes, whose workspaces count at s = 256); `--moe-imbalance F`
and the default say their assumption and predict the same peak on one rank; an override plans
the run's model changed, and a data-parallel rank is shown but not compared. A model the routing cannot belong to, an older run, a dense run, an imbalance out
of range and both options at once are refused with one line naming the numbers (exit 1).
Python standard library only.
"""
import argparse
import csv
import json
import os
import shutil
import sys
import tempfile

import e2e_common
from e2e_common import check

POLICY = "selective:modules=moe"


class Batch(e2e_common.Batch):
    def refuses(self, args, *words):
        p = super().refuses(args, *words)
        check(p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1,
              "`%s`: one line and exit 1 expected: %d %r" % (" ".join(map(str, args)), p.returncode, p.stderr))


def small_qwen3_moe(source, path):
    with open(os.path.join(source, "tests", "data", "hf-configs", "qwen3-30b-a3b.json")) as f:
        cfg = json.load(f)
    cfg.update(hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_attention_heads=4,
               num_key_value_heads=2, head_dim=16, num_hidden_layers=2, num_experts=8, num_experts_per_tok=2,
               vocab_size=256, max_position_embeddings=64, mlp_only_layers=[1])
    with open(path, "w") as f:
        json.dump(cfg, f)


def test(b, work, source):
    cfg = os.path.join(work, "small-qwen3-moe.json")
    small_qwen3_moe(source, cfg)
    run = os.path.join(work, "run")
    b.run("run", "--model", cfg, "--seq", "256", "--batch", "1", "--policy", POLICY, "--steps", "1", "--warmup", "1",
          "--threads", "2", "--out", run)
    with open(os.path.join(run, "routing.csv")) as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(run, "summary.json")) as f:
        summary = json.load(f)
    check([int(r["expert"]) for r in rows] == list(range(8)) and {r["layer"] for r in rows} == {"0"},
          "routing.csv has every expert of layer 0 alone: %r" % rows)
    routed = [int(r["routed"]) for r in rows]
    check(sum(routed) == 256 * 2 and all(r["kept"] == r["routed"] for r in rows),
          "layer 0 routed tokens x top_k, all kept (dropless): %r" % rows)
    check(summary.get("files", {}).get("routing.csv", {}).get("rows") == 8, "summary.json counts routing.csv's rows")

    # The run's model, its routing and, under its policy, its peak to the byte.
    p = b.json("plan", "--routing-from", run, "--policy", POLICY, "--json") or {}
    r = p.get("routing", {})
    busiest = max(range(8), key=lambda e: (routed[e], -e))
    check(r.get("assumption") == "recorded" and r.get("from") == run, "plan --json names the recorded routing: %r" % r)
    check(r.get("comparable") is True and r.get("predicted_minus_measured_bytes") == 0 and
          r.get("recorded_peak_bytes") == summary["peak_bytes"] == p.get("predicted_peak_bytes"),
          "the prediction is the run's measured peak: %r vs %r" % (r, summary.get("peak_bytes")))
    layers = r.get("layers", [])
    check(len(layers) == 1 and layers[0].get("busiest_expert") == busiest and layers[0].get("most") == routed[busiest]
          and abs(layers[0].get("imbalance", 0) - routed[busiest] * 8 / 512.0) < 1e-12,
          "the layer's busiest expert as routing.csv has it: %r, %r" % (layers, routed))
    check(r.get("peak_depends_on_routing") is False, "one rank's peak does not depend on the routing")
    text = b.run("plan", "--routing-from", run, "--policy", POLICY).stdout
    check("routing               recorded in " + run in text and "predicted - measured = 0 bytes" in text,
          "plan says the routing it used and the difference: %r" % text)
    other = b.run("plan", "--routing-from", run, "--policy", "none").stdout
    check("not compared" in other, "another policy's prediction is not compared with the run: %r" % other)

    # The default and an assumed imbalance: said, and the same peak on one rank.
    base = b.json("plan", "--model", cfg, "--seq", "256", "--batch", "1", "--policy", POLICY, "--json") or {}
    skew = b.json("plan", "--model", cfg, "--seq", "256", "--batch", "1", "--policy", POLICY, "--moe-imbalance", "3",
                  "--json") or {}
    check(base.get("routing", {}).get("assumption") == "balanced" and
          skew.get("routing", {}).get("assumption") == "imbalance" and skew["routing"].get("imbalance") == 3,
          "plan says balanced or the imbalance it assumed: %r %r" % (base.get("routing"), skew.get("routing")))
    check(base.get("predicted_peak_bytes") == skew.get("predicted_peak_bytes") > 0,
          "one rank's peak under any routing")
    # An override plans the run's model changed (not compared); a data-parallel rank is not compared.
    fp32 = b.run("plan", "--routing-from", run, "--policy", POLICY, "--dtype", "fp32").stdout
    check("on model small-qwen3-moe" in fp32 and "not compared" in fp32, "--dtype plans the run's model: %r" % fp32)
    dp = os.path.join(work, "dp")
    b.run("run", "--model", cfg, "--seq", "32", "--batch", "2", "--steps", "1", "--warmup", "0", "--dp", "2", "--out", dp)
    ranked = b.run("plan", "--routing-from", os.path.join(dp, "rank-1")).stdout
    check("a rank of dp 2" in ranked and "not compared" in ranked, "a data-parallel rank is not compared: %r" % ranked)
    said = b.run("plan", "--model", cfg, "--moe-imbalance", "3").stdout
    check("imbalance 3.00 assumed" in said, "plan says its assumed imbalance: %r" % said)

    # Refusals, each one line with the numbers.
    b.refuses(["plan", "--routing-from", run, "--model", cfg, "--seq", "16", "--batch", "2"], "--routing-from " + run,
              "tokens per micro-batch", "256, the model has 32")
    b.refuses(["plan", "--routing-from", run, "--model", "tiny"], "has no experts")
    moe16 = os.path.join(work, "sixteen.json")
    with open(cfg) as f:
        c = json.load(f)
    c["num_experts"] = 16
    with open(moe16, "w") as f:
        json.dump(c, f)
    b.refuses(["plan", "--routing-from", run, "--model", moe16, "--seq", "256", "--batch", "1"],
              "experts 8, the model has 16")
    b.refuses(["plan", "--routing-from", run, "--moe-imbalance", "2"], "give one")
    b.refuses(["plan", "--routing-from", run, "--tp", "2"], "--routing-from takes no --tp")
    b.refuses(["plan", "--paper-figure7", "--moe-imbalance", "2"], "--moe-imbalance takes no")
    b.refuses(["plan", "--model", cfg, "--moe-imbalance", "0.5"], "between 1 (balanced) and 4.00",
              "experts 8 / top_k 2")
    b.refuses(["plan", "--model", cfg, "--moe-imbalance", "5"], "between 1 (balanced) and 4.00")
    b.refuses(["plan", "--model", "tiny", "--moe-imbalance", "2"], "--moe-imbalance", "has no experts")
    dense = os.path.join(work, "dense")
    b.run("run", "--model", "tiny", "--steps", "1", "--warmup", "0", "--out", dense)
    b.refuses(["plan", "--routing-from", dense], "--routing-from " + dense, "has no experts")
    old = os.path.join(source, "tests", "data", "run-v5")
    b.refuses(["plan", "--routing-from", old], "format version 5 records no routing")
    b.refuses(["plan", "--routing-from", os.path.join(work, "nowhere")], "--routing-from")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="rematlab-routing-e2e-")
    try:
        test(Batch(os.path.abspath(a.bin)), work, os.path.abspath(a.source_dir))
    finally:
        if a.keep:
            print("kept " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return e2e_common.exit_code()


if __name__ == "__main__":
    sys.exit(main())
