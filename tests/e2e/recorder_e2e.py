"""The PyTorch recorder (python/rematlab) end to end: a GPT-2-style and a Llama-style model
(tests/torch_models) recorded, read back by rematlab-batch (compare, export), a checkpoint
plan predicted from the recording (plan --from-run) and applied (rematlab.checkpoint_plan),
the prediction's saved bytes equal to what the second recording measures, to the byte; and the
failure paths: an error in the step, a model that saves nothing, a taken target, a run that is
not a recording. Exits 77 (skipped) without torch."""
import argparse
import copy
import glob
import json
import os
import shutil
import sys
import tempfile
import warnings

from e2e_common import Batch, check, exit_code

ap = argparse.ArgumentParser()
ap.add_argument("--bin", required=True)
ap.add_argument("--source-dir", required=True)
args = ap.parse_args()
try:
    import torch
except ImportError:
    print("skipped: no torch for %s" % sys.executable)
    sys.exit(77)
sys.path.insert(0, os.path.join(args.source_dir, "python"))
sys.path.insert(0, os.path.join(args.source_dir, "tests", "torch_models"))
import rematlab  # noqa: E402
import models  # noqa: E402

batch = Batch(args.bin)
work = tempfile.mkdtemp(prefix="recorder-e2e-")
torch.set_num_threads(1)


def summary(d):
    with open(os.path.join(d, "summary.json")) as f:
        return json.load(f)


def step(model, out, plan=None, **kw):
    """One AdamW step of `model` (a copy), recorded into `out`, under `plan` when given."""
    model = copy.deepcopy(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if plan is not None:
        rematlab.checkpoint_plan(model, plan)
    x, y = models.batch(128, batch=2, seq=16)
    with rematlab.record(out, model=model, optimizer=opt, **kw) as rec:
        loss = model(x, y)
        loss.backward()
        opt.step()
        rec.loss(loss)
    return rec


def check_model(name, model, config):
    base = os.path.join(work, name + "-none")
    rec = step(model, base, model_config=config)
    s = summary(base)
    check(s["source"] == "pytorch" and s["torch_version"] == torch.__version__,
          "%s: summary.json names the source and the torch version" % name)
    check(s["recorded"]["saved_bytes_at_backward"] > 0 and rec.saved, "%s: saved tensors recorded" % name)
    check(any(r["alias"].startswith("parameter:") for r in rec.saved),
          "%s: a saved weight is recorded as aliasing its parameter" % name)
    check(all(r["node"] for r in rec.saved if r["held_at_backward"]),
          "%s: every tensor held for backward has the node that saved it" % name)
    check(all(r["released_ns"] >= r["packed_ns"] for r in rec.saved),
          "%s: backward released every saved tensor after it was saved" % name)
    blocks = s["model"]["layers"]
    check(len(s["saved_bytes_per_block"]) == blocks and all(b > 0 for b in s["saved_bytes_per_block"]),
          "%s: each of the %d blocks holds saved bytes" % (name, blocks))
    check(s["flops"]["forward"] > 0 and s["flops"]["backward"] > s["flops"]["forward"],
          "%s: the profiler's FLOPs of the blocks' forward and backward" % name)
    # The CLI reads the recording back like any run.
    batch.run("compare", base, "--json")
    batch.run("export", base, "--format", "chrome", "--out", os.path.join(work, name + ".trace.json"))
    batch.run("export", base, "--format", "csv", "--out", os.path.join(work, name + "-csv"))
    for plan in ("per-block", "sqrt", "every:2", "modules:*.mlp"):
        pred = batch.json("plan", "--from-run", base, "--policy", plan, "--json")
        if pred is None:
            continue
        check(pred["recorded_saved_bytes"] == s["recorded"]["saved_bytes_at_backward"],
              "%s %s: the plan starts from the recorded saved bytes (%s vs %s)"
              % (name, plan, pred["recorded_saved_bytes"], s["recorded"]["saved_bytes_at_backward"]))
        check(pred["saved_bytes"] < pred["recorded_saved_bytes"], "%s %s: the plan saves less" % (name, plan))
        out = os.path.join(work, "%s-%s" % (name, plan.replace(":", "_").replace("*", "x")))
        rec2 = step(model, out, plan=plan, model_config=config)
        s2 = summary(out)
        measured = s2["recorded"]["saved_bytes_at_backward"]
        check(pred["saved_bytes"] == measured,
              "%s %s: predicted saved bytes %d, measured %d" % (name, plan, pred["saved_bytes"], measured))
        check(pred["recompute_flops"] == s2["flops"]["recompute"],
              "%s %s: predicted recompute FLOPs %s, measured %s"
              % (name, plan, pred["recompute_flops"], s2["flops"]["recompute"]))
        check(s2["grad_checksum"] == s["grad_checksum"],
              "%s %s: the checkpointed step gives the same gradients" % (name, plan))
        check(any(r["category"] == "checkpoints" for r in rec2.saved), "%s %s: checkpoint inputs recorded" % (name, plan))
        check(s2["activation_peak_bytes"] < s["activation_peak_bytes"],
              "%s %s: the activation peak falls (%d -> %d)" % (name, plan, s["activation_peak_bytes"],
                                                               s2["activation_peak_bytes"]))
        cmp = batch.json("compare", base, out, "--json")
        runs = cmp["runs"] if cmp is not None else []
        check(len(runs) == 2 and runs[1]["policy"] == plan and runs[1]["peak_bytes"] <= runs[0]["peak_bytes"]
              and runs[1]["grads_match_none"] is True and runs[1]["recompute_flops"] == pred["recompute_flops"],
              "%s %s: compare puts the checkpointed recording against the none one: %s" % (name, plan, runs[1:]))


check_model("gpt2", models.Gpt2(vocab=128, hidden=48, heads=4, layers=4, positions=16), {})
check_model("llama", models.Llama(vocab=128, hidden=64, heads=4, kv_heads=2, ffn=128, layers=3),
            {"architecture": "llama", "kv_heads": 2, "ffn": 128})

# An error in the step propagates and leaves nothing that looks like a run.
failed = os.path.join(work, "failed")
m = models.Gpt2(vocab=128, hidden=32, heads=2, layers=2, positions=16)
try:
    with rematlab.record(failed, model=m):
        x, y = models.batch(128, seq=16)
        m(x, y).backward()
        raise RuntimeError("boom in the step")
    check(False, "the step's error propagates")
except RuntimeError as e:
    check("boom" in str(e), "the step's own error propagates")
check(not os.path.exists(failed) and not glob.glob(os.path.join(work, ".failed.*")),
      "a failed step leaves no run directory and no temporary one")
check(rematlab.recorder.current() is None, "the recorder is detached after an error")

# A target that exists is refused before the step runs.
try:
    with rematlab.record(os.path.join(work, "gpt2-none"), model=m):
        check(False, "record into an existing run runs the step")
except FileExistsError as e:
    check("overwrite" in str(e), "an existing target is refused, naming overwrite=True")

# A model that saves nothing: a warning, an empty ledger, a run the CLI still reads.
empty = os.path.join(work, "no-grad")
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    with torch.no_grad(), rematlab.record(empty, model=m) as rec:
        m(*models.batch(128, seq=16))
check(any("saved no tensors" in str(x.message) for x in w), "a step that saves nothing says so")
check(rec.saved == [] and summary(empty)["recorded"]["saved_bytes_at_backward"] == 0, "its ledger is empty")
batch.run("compare", empty)
p = batch.json("plan", "--from-run", empty, "--policy", "per-block", "--json")
check(p is not None and p["saved_bytes"] == 0, "a plan of a step that saved nothing predicts 0 bytes")

# Bad input to plan --from-run is refused with a message.
batch.refuses(["plan", "--from-run", os.path.join(args.source_dir, "tests", "data", "run-v1"), "--policy", "sqrt"],
              "not a recorded PyTorch run")
batch.refuses(["plan", "--from-run", os.path.join(work, "gpt2-none"), "--policy", "every:0"], "every:K")
batch.refuses(["plan", "--from-run", os.path.join(work, "gpt2-none"), "--policy", "bogus"], "per-block")
batch.refuses(["plan", "--from-run", os.path.join(work, "gpt2-none"), "--policy", "modules:nothing.here"],
              "no module path")
bad = os.path.join(work, "edited")
shutil.copytree(os.path.join(work, "gpt2-none"), bad)
with open(os.path.join(bad, "saved_tensors.csv"), "a") as f:
    f.write("999,h.0,zero,saved_activations,forward,,,,float32,1,4,1,4,,0,-1,-1,1\n")
batch.refuses(["plan", "--from-run", bad, "--policy", "per-block"], "saved_tensors.csv", "line")
with open(os.path.join(bad, "summary.json")) as f:
    js = json.load(f)
js["recorded"]["blocks"] = 10 ** 9
with open(os.path.join(bad, "summary.json"), "w") as f:
    json.dump(js, f)
batch.refuses(["plan", "--from-run", bad, "--policy", "per-block"], "recorded.blocks")
try:
    rematlab.checkpoint_plan(copy.deepcopy(m), "every:x")
    check(False, "a bad plan is refused by checkpoint_plan")
except ValueError as e:
    check("every" in str(e), "checkpoint_plan names the bad plan")

code = exit_code("recorder e2e ok")
if code == 0:
    shutil.rmtree(work, ignore_errors=True)
else:
    print("kept " + work)
sys.exit(code)
