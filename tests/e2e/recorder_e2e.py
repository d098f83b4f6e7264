"""The PyTorch recorder (python/rematlab) end to end: a GPT-2-style and a Llama-style model
(tests/torch_models) recorded, read back by rematlab-batch (compare, export), a checkpoint
plan predicted from the recording (plan --from-run) and applied (rematlab.checkpoint_plan),
the prediction's saved bytes equal to what the second recording measures, to the byte; the
selective plans (selective:keep=CLASS) against a recount from the recorded tables and a hand
formula; the plan syntax the same in Python and C++; and the failure paths: an error in the
step, a model that saves nothing, a taken target, a run that is not a recording, a recording of a
newer format or from before op outputs were recorded. Exits 77 (skipped) without torch."""
import argparse
import contextlib
import io
import copy
import csv
import enum
import functools
import glob
import json
import os
import shutil
import sys
import tempfile
import warnings

from e2e_common import Batch, check, csv_rows, exit_code, torch_or_skip

ap = argparse.ArgumentParser()
ap.add_argument("--bin", required=True)
ap.add_argument("--source-dir", required=True)
args = ap.parse_args()
torch = torch_or_skip(args.source_dir)
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
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        rec = step(model, base, model_config=config)
    check(not any("placeholders" in str(x.message) for x in warned),
          "%s: a language model's description is read off it, no placeholders" % name)
    s = summary(base)
    check(s["source"] == "pytorch" and s["torch_version"] == torch.__version__,
          "%s: summary.json names the source and the torch version" % name)
    check(s["recorded"]["saved_bytes_at_backward"] > 0 and rec.saved, "%s: saved tensors recorded" % name)
    check(rec.summary is not None and json.loads(json.dumps(rec.summary, sort_keys=True)) == s,
          "%s: Recorder.summary is what summary.json holds" % name)
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


def table(d, name):
    with open(os.path.join(d, name), newline="") as f:
        return list(csv.DictReader(f))


def selective_recount(d, classes):
    """The bytes selective:keep=CLASSES (per block) saves, counted from the recorded tables: each
    storage once, parameters left out; kept are what autograd holds for backward outside the
    blocks, each block's input (its forward call's tensor arguments) and, inside the blocks, the
    outputs of the classes' ops."""
    s = summary(d)
    prefix = s["recorded"]["blocks_module"]
    blocks = ["%s.%d" % (prefix, b) if prefix else str(b) for b in range(s["recorded"]["blocks"])]
    ops = set(op for c in classes for op in s["recorded"]["op_classes"][c])

    def in_block(module):
        return any(module == b or module.startswith(b + ".") for b in blocks)
    saved = table(d, "saved_tensors.csv")
    params = set(r["storage"] for r in saved if r["alias"].startswith("parameter:"))
    held = {}  # storage -> bytes
    for r in saved:
        if r["held_at_backward"] == "1" and r["storage"] not in params and not in_block(r["module"]):
            held[r["storage"]] = int(r["storage_bytes"])
    for c in table(d, "module_calls.csv"):
        if c["phase"] == "forward" and c["module"] in blocks:
            for item in c["inputs"].split():
                st, b = item.split(":")
                if st not in params:
                    held.setdefault(st, int(b))
    for o in table(d, "op_outputs.csv"):
        if o["op"] in ops and in_block(o["module"]) and o["storage"] not in params:
            held.setdefault(o["storage"], int(o["storage_bytes"]))
    return sum(held.values())


def check_selective(name, base):
    """selective:keep=matmul of the `none` recording `base`: the prediction against a recount."""
    pred = batch.json("plan", "--from-run", base, "--policy", "selective:keep=matmul", "--json")
    if pred is None:
        return None
    want = selective_recount(base, ["matmul"])
    check(pred["saved_bytes"] == want, "%s selective:keep=matmul: predicted %d bytes, recounted from the tables %d"
          % (name, pred["saved_bytes"], want))
    per_block = batch.json("plan", "--from-run", base, "--policy", "per-block", "--json")
    check(per_block is not None and pred["saved_bytes"] > per_block["saved_bytes"]
          and pred["saved_bytes"] - pred["kept_output_bytes"] == per_block["saved_bytes"],
          "%s: selective keeps per-block's bytes and the matmul outputs on top" % name)
    s = summary(base)
    check(isinstance(pred["recompute_flops"], int) and 0 <= pred["recompute_flops"] < s["flops"]["forward"]
          and pred["recomputed_ops"] > pred["recomputed_ops_without_flops"] > 0,
          "%s selective:keep=matmul: recomputes the non-matmul ops (%s FLOPs, %s ops, %s without FLOPs)"
          % (name, pred["recompute_flops"], pred["recomputed_ops"], pred["recomputed_ops_without_flops"]))
    both = batch.json("plan", "--from-run", base, "--policy", "selective:keep=matmul,sdpa", "--json")
    check(both is not None and both["saved_bytes"] == want,
          "%s: keep=matmul,sdpa adds nothing where no op is an sdpa" % name)
    sub = batch.json("plan", "--from-run", base, "--policy", "selective:keep=matmul@modules:*.mlp", "--json")
    check(sub is not None and sub["checkpointed"] and all(m.endswith(".mlp") for m in sub["checkpointed"])
          and sub["kept_output_bytes"] > 0 and sub["kept_output_bytes"] < pred["kept_output_bytes"],
          "%s: selective over modules:*.mlp keeps the mlps' matmul outputs only" % name)
    return pred


check_model("gpt2", models.Gpt2(vocab=128, hidden=48, heads=4, layers=4, positions=16), {})
check_model("llama", models.Llama(vocab=128, hidden=64, heads=4, kv_heads=2, ffn=128, layers=3),
            {"architecture": "llama", "kv_heads": 2, "ffn": 128})
# torch >= 2.0 hands forward pre-hooks the keyword arguments itself (with_kwargs=True): the recorder
# asks for them there, checked against a stand-in of that API (this torch may predate it).
class StandIn:
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        self.hook, self.with_kwargs = hook, with_kwargs
        return "handle"


seen = []
stand_in = StandIn()
check(rematlab.compat.forward_pre_hook(stand_in, lambda m, a, k: seen.append((a, k))) == "handle"
      and stand_in.with_kwargs is True, "with torch >= 2.0's hooks the recorder asks for keyword arguments")
stand_in.hook(stand_in, (1,), {"encoder_hidden_states": 2})
check(seen == [((1,), {"encoder_hidden_states": 2})], "the hook gets them: %r" % seen)
check(torch.nn.Module.__call__ is torch.nn.Module.__dict__["__call__"] and
      getattr(torch.nn.Module.__call__, "__name__", "") != "call", "nn.Module.__call__ is torch's own after recording")

# Blocks called as T5's and BART's are: the encoder's states and the mask as keyword arguments
# (kept by each checkpoint, so in the prediction too), tuples returned.
check_model("cross", models.CrossDecoder(vocab=128, hidden=48, heads=4, layers=4), {})

# Selective plans on both recordings; for the GPT-2 model (hidden 48, 4 heads of 12, batch 2,
# sequence 16, fp32) block 1 keeps, by hand: its input x (2, 16, 48) and its matmul outputs:
# attn.c_attn (2, 16, 144), q @ k^T (2, 4, 16, 16), softmax @ v (2, 4, 16, 12), attn.c_proj
# (2, 16, 48), mlp.c_fc (2, 16, 192), mlp.c_proj (2, 16, 48).
gpt2_pred = check_selective("gpt2", os.path.join(work, "gpt2-none"))
check_selective("llama", os.path.join(work, "llama-none"))
B, S, H, NH = 2, 16, 48, 4
hand = 4 * (B * S * H + B * S * 3 * H + B * NH * S * S + B * NH * S * (H // NH) + B * S * H + B * S * 4 * H + B * S * H)
check(gpt2_pred is not None and gpt2_pred["saved_bytes_per_block"][1] == hand == 75776,
      "gpt2 selective:keep=matmul: block 1 keeps %s bytes, by hand %d"
      % (gpt2_pred and gpt2_pred["saved_bytes_per_block"][1], hand))

# Recorded without the profiler: the op outputs are there, the FLOPs and ops are unknown.
noprof = os.path.join(work, "gpt2-no-profiler")
step(models.Gpt2(vocab=128, hidden=48, heads=4, layers=4, positions=16), noprof, profile=False)
p = batch.json("plan", "--from-run", noprof, "--policy", "selective:keep=matmul", "--json")
check(p is not None and p["saved_bytes"] == selective_recount(noprof, ["matmul"]) == gpt2_pred["saved_bytes"]
      and p["recompute_flops"] == p["recomputed_ops"] == "unknown",
      "without the profiler: the same bytes, FLOPs and ops unknown: %s" % p)

# docs/own-model.md's table of op classes is the one of python/rematlab/op_classes.py.
doc_classes = {}
with open(os.path.join(args.source_dir, "docs", "own-model.md")) as f:
    for line in f:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`") and cells[0].strip("`") in rematlab.op_classes.OP_CLASSES:
            doc_classes[cells[0].strip("`")] = tuple("aten::" + c.strip().strip("`") for c in cells[1].split(","))
check(doc_classes == rematlab.op_classes.OP_CLASSES,
      "docs/own-model.md lists the op classes of op_classes.py: %s" % doc_classes)
check(summary(os.path.join(work, "gpt2-none"))["recorded"]["op_classes"]
      == {k: list(v) for k, v in rematlab.op_classes.OP_CLASSES.items()}, "a recording carries the op classes")

# The plan syntax: Python's parse_plan and the CLI accept and refuse the same plans.
gpt2_none = os.path.join(work, "gpt2-none")
for text in ("none", "per-block", "every:2", "segments:3", "sqrt", "modules:*.mlp", "selective:keep=matmul",
             "selective:keep=matmul,sdpa@segments:2", "selective:keep=conv@modules:h.*.attn",
             "every:0", "sqrt:2", "modules:", "selective", "selective:matmul", "selective:keep=",
             "selective:keep=matmul,", "selective:keep=foo", "selective:keep=matmul@", "selective:keep=matmul@every:x",
             "selective:keep=matmul@selective:keep=sdpa", "selective:keep=matmul@bogus"):
    try:
        rematlab.parse_plan(text)
        py_ok, py_msg = True, ""
    except ValueError as e:
        py_ok, py_msg = False, str(e)
    p = batch.run("plan", "--from-run", gpt2_none, "--policy", text, expect=0 if py_ok else "fail")
    check("Traceback" not in p.stderr and "terminate called" not in p.stderr, "plan %r: no crash" % text)
    if not py_ok:
        check(("'%s'" % text) in py_msg and ("'%s'" % text) in p.stderr,
              "plan %r: both messages name the plan: %r / %r" % (text, py_msg, p.stderr.strip()))
for text, words in (("selective:keep=foo", ["unknown op class 'foo'", "matmul"]),
                    ("selective:matmul", ["keep=CLASS"]), ("selective:keep=matmul@every:0", ["every"]),
                    ("selective:keep=matmul@none", ["not none"])):
    batch.refuses(["plan", "--from-run", gpt2_none, "--policy", text], *words)
    try:
        rematlab.parse_plan(text)
        check(False, "parse_plan refuses %r" % text)
    except ValueError as e:
        check(all(w.lower() in str(e).lower() for w in words), "parse_plan %r names %s: %s" % (text, words, e))

# Without --policy, plan --from-run predicts the step as recorded (the plan none).
p = batch.json("plan", "--from-run", gpt2_none, "--json") or {}
check(p.get("policy") == "none" and p.get("saved_bytes") == p.get("recorded_saved_bytes") and p.get("recompute_flops") == 0,
      "plan --from-run without --policy: the step as recorded: %r" % {k: p.get(k) for k in ("policy", "saved_bytes")})

# checkpoint_plan refuses a selective plan where torch has no selective checkpointing.
sel_model = models.Gpt2(vocab=128, hidden=32, heads=2, layers=2, positions=16)
if hasattr(torch.utils.checkpoint, "create_selective_checkpoint_contexts"):
    h = rematlab.checkpoint_plan(sel_model, "selective:keep=matmul")
    check(sel_model._rematlab_plan.keep == ("matmul",), "checkpoint_plan applies a selective plan")
    h.remove()
else:
    try:
        rematlab.checkpoint_plan(sel_model, "selective:keep=matmul")
        check(False, "checkpoint_plan refuses selective on torch %s" % torch.__version__)
    except RuntimeError as e:
        check("torch >= 2.4" in str(e) and torch.__version__ in str(e),
              "the refusal names the minimum and the installed torch: %s" % e)
    check(getattr(sel_model, "_rematlab_plan", None) is None and "forward" not in sel_model.h[0].__dict__,
          "a refused selective plan leaves the model as it was")

# The selective path against stand-ins of torch >= 2.4's API (torch.utils.checkpoint's
# CheckpointPolicy, create_selective_checkpoint_contexts and checkpoint with context_fn), which
# this torch may not have: each block is checkpointed with use_reentrant=False and a context_fn
# of the policy; the policy saves the matmul class's aten ops and recomputes the rest.
class StandInPolicy(enum.Enum):
    MUST_SAVE, PREFER_SAVE, MUST_RECOMPUTE, PREFER_RECOMPUTE = range(4)


made, ckpt_calls = [], []


def stand_in_contexts(policy_fn, allow_cache_entry_mutation=False):
    made.append(policy_fn)
    return contextlib.nullcontext(), contextlib.nullcontext()


def stand_in_checkpoint(function, *args, use_reentrant=None, context_fn=None, **kwargs):
    ckpt_calls.append((use_reentrant, context_fn))
    context_fn()
    return function(*args, **kwargs)


tuc = torch.utils.checkpoint
names = ("checkpoint", "CheckpointPolicy", "create_selective_checkpoint_contexts")
real = {n: tuc.__dict__[n] for n in names if n in tuc.__dict__}
tuc.checkpoint, tuc.CheckpointPolicy = stand_in_checkpoint, StandInPolicy
tuc.create_selective_checkpoint_contexts = stand_in_contexts
try:
    planned, plain = copy.deepcopy(sel_model), copy.deepcopy(sel_model)
    handle = rematlab.checkpoint_plan(planned, "selective:keep=matmul")
    xs, ys = models.batch(128, seq=16)
    planned(xs, ys).backward()
    plain(xs, ys).backward()
finally:
    for n in names:
        if n in real:
            setattr(tuc, n, real[n])
        else:
            delattr(tuc, n)
check(len(ckpt_calls) == 2 and all(r is False and isinstance(c, functools.partial)
                                   and c.func is stand_in_contexts for r, c in ckpt_calls),
      "selective: each block runs checkpoint(use_reentrant=False, context_fn=partial(contexts, policy)): %s"
      % ckpt_calls)
if made:
    pol, aten = made[0], torch.ops.aten
    want = {aten.mm.default: StandInPolicy.MUST_SAVE, aten.addmm.default: StandInPolicy.MUST_SAVE,
            aten.bmm.default: StandInPolicy.MUST_SAVE, aten.baddbmm.default: StandInPolicy.MUST_SAVE,
            aten.gelu.default: StandInPolicy.PREFER_RECOMPUTE, aten._softmax.default: StandInPolicy.PREFER_RECOMPUTE,
            aten.native_layer_norm.default: StandInPolicy.PREFER_RECOMPUTE, aten.add.Tensor: StandInPolicy.PREFER_RECOMPUTE}
    got = {op: pol(None, op) for op in want}
    check(got == want, "selective policy: matmul ops saved, the rest recomputed: %s" % got)
else:
    check(False, "selective: the policy was made")
check(all(torch.equal(a.grad, b.grad) for a, b in zip(planned.parameters(), plain.parameters())),
      "selective through the stand-ins: the same gradients")
handle.remove()
check(getattr(planned, "_rematlab_plan", None) is None, "remove() takes the selective plan off")

# A recording from before op outputs: plain plans as before, selective refused by name.
old = os.path.join(work, "before-op-outputs")
shutil.copytree(gpt2_none, old)
os.remove(os.path.join(old, "op_outputs.csv"))
with open(os.path.join(old, "summary.json")) as f:
    js = json.load(f)
del js["recorded"]["op_classes"], js["recorded"]["op_outputs"], js["files"]["op_outputs.csv"]
with open(os.path.join(old, "summary.json"), "w") as f:
    json.dump(js, f)
a = batch.json("plan", "--from-run", old, "--policy", "per-block", "--json")
b = batch.json("plan", "--from-run", gpt2_none, "--policy", "per-block", "--json")
check(a is not None and b is not None and a["saved_bytes"] == b["saved_bytes"],
      "a recording without op outputs predicts plain plans the same")
batch.refuses(["plan", "--from-run", old, "--policy", "selective:keep=matmul"], "predates selective plans")
batch.run("compare", old)
# A recording of a newer format, and one whose summary.json is cut short.
newer = os.path.join(work, "newer-format")
shutil.copytree(gpt2_none, newer)
js = summary(newer)
js["format_version"] = 99
with open(os.path.join(newer, "summary.json"), "w") as f:
    json.dump(js, f)
batch.refuses(["plan", "--from-run", newer, "--policy", "per-block"], "format version 99 is newer")
with open(os.path.join(newer, "summary.json"), "w") as f:
    f.write(json.dumps(summary(gpt2_none))[:200])
batch.refuses(["plan", "--from-run", newer, "--policy", "per-block"], "summary.json")

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

# A target whose parents do not exist yet: made as the run is written (as rematlab-batch makes
# them); one under a file is refused before the step runs.
deep = os.path.join(work, "new", "parents", "run")
step(models.Gpt2(vocab=128, hidden=48, heads=4, layers=2), deep, profile=False)
check(summary(deep)["complete"] is True, "record makes the missing parents of its directory")
try:
    with rematlab.record(os.path.join(work, "gpt2-none", "summary.json", "run"), model=m):
        check(False, "record under a file runs the step")
except NotADirectoryError as e:
    check("is not a directory" in str(e), "a target under a file is refused: %s" % e)

# A target that exists is refused before the step runs.
try:
    with rematlab.record(os.path.join(work, "gpt2-none"), model=m):
        check(False, "record into an existing run runs the step")
except FileExistsError as e:
    check("overwrite" in str(e), "an existing target is refused, naming overwrite=True")

# overwrite=True replaces only a run: a directory whose summary.json is cut short, or that has
# none, is refused before the step runs and left as it was.
for what, content in (("cut-summary", json.dumps(summary(os.path.join(work, "gpt2-none")))[:150]),
                      ("no-summary", None)):
    target = os.path.join(work, what)
    os.mkdir(target)
    with open(os.path.join(target, "summary.json" if content is not None else "notes.txt"), "w") as f:
        f.write(content if content is not None else "mine")
    try:
        with rematlab.record(target, model=m, overwrite=True):
            check(False, "record over %s runs the step" % what)
    except FileExistsError as e:
        check("not a RematLab run directory" in str(e), "record(overwrite=True) refuses %s: %s" % (what, e))
    check(sorted(os.listdir(target)) == ["summary.json" if content is not None else "notes.txt"],
          "%s is left as it was" % what)
# Module names a run directory cannot hold are refused before the step runs, naming the module
# (a NUL made a complete directory that compare and export refused; a lone surrogate lost the run
# when summary.json was written).
for bad, why in (("a\0b", "holds a NUL byte"), ("a\udcffb", "cannot be written as UTF-8")):
    odd = models.Gpt2(vocab=128, hidden=32, heads=2, layers=2, positions=16)
    odd.add_module(bad, torch.nn.Identity())
    target = os.path.join(work, "odd-name")
    try:
        with rematlab.record(target, model=odd):
            check(False, "record of a module named %r runs the step" % bad)
    except ValueError as e:
        check("module name %r" % bad in str(e) and why in str(e), "record refuses a module named %r: %s" % (bad, e))
    check(not os.path.exists(target), "nothing is written for a module named %r" % bad)
    check(rematlab.recorder.current() is None, "the recorder is not attached after refusing %r" % bad)
try:
    rematlab.checkpoint_plan(copy.deepcopy(m), "selective:keep=foo")
    check(False, "checkpoint_plan refuses an unknown op class")
except ValueError as e:
    check("unknown op class 'foo'" in str(e), "checkpoint_plan names the unknown op class: %s" % e)

# BatchNorm's running statistics, which its backward saves, are the model's buffers: recorded as
# such (alias buffer:NAME), no activation, and plan --from-run leaves them out.
class BnBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin, self.bn = torch.nn.Linear(16, 16), torch.nn.BatchNorm1d(16)

    def forward(self, x):
        return x + torch.relu(self.bn(self.lin(x)))


class BnModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(BnBlock() for _ in range(2))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x.pow(2).mean()


bn_dir = os.path.join(work, "batchnorm")
bn = BnModel()
with warnings.catch_warnings(record=True) as bn_warned:
    warnings.simplefilter("always")
    with rematlab.record(bn_dir, model=bn, profile=False) as rec:
        bn_loss = bn(torch.randn(8, 16))
        bn_loss.backward()
        rec.loss(bn_loss)
# Not a language model: its description is placeholders, and the recording says so.
check(any("placeholders (hidden 64, vocab 256, seq 16, batch 8" in str(x.message) and "model_config" in str(x.message)
          for x in bn_warned), "a model without an embedding or token inputs: a warning of the placeholders: %r"
      % [str(x.message) for x in bn_warned])
stats = [r for r in rec.saved if "running_" in r["alias"]]
check(len(stats) == 4 and all(r["alias"].startswith("buffer:blocks.") for r in stats),
      "BatchNorm's saved running statistics are recorded as its buffers: %r" % [r["alias"] for r in stats])
activations = sum(r["storage_bytes"] for r in rec.saved if r["held_at_backward"] and not r["alias"])
bn_plan = batch.json("plan", "--from-run", bn_dir, "--json") or {}
check(bn_plan.get("recorded_saved_bytes") == activations,
      "plan --from-run counts no buffer as saved activations: %r, by hand %d" % (bn_plan.get("recorded_saved_bytes"),
                                                                             activations))

# Blocks in an nn.Sequential, as torchvision writes ResNet (its stem, a Sequential of three
# classes, is not them): recorded as the blocks, and per-block predicted to the byte.
class Basic(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(c, c, 3, padding=1, bias=False), torch.nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.bn(self.conv(x)))


class Res(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
        self.layer1 = torch.nn.Sequential(*(Basic(4) for _ in range(3)))
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(self.layer1(self.stem(x)).mean((2, 3))).pow(2).mean()


def record_res(model, out, plan=None):
    model = copy.deepcopy(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BatchNorm's and the placeholder description's
        if plan:
            rematlab.checkpoint_plan(model, plan)
        with rematlab.record(out, model=model, profile=False) as r:
            loss = model(torch.ones(2, 3, 6, 6))
            loss.backward()
            r.loss(loss)
    return summary(out)


res = Res()
res_none = record_res(res, os.path.join(work, "res-none"))
check(res_none["recorded"]["blocks"] == 3 and res_none["recorded"]["blocks_module"] == "layer1",
      "a ResNet's blocks are layer1's: %r" % {k: res_none["recorded"][k] for k in ("blocks", "blocks_module")})
res_pred = batch.json("plan", "--from-run", os.path.join(work, "res-none"), "--policy", "per-block", "--json") or {}
res_pb = record_res(res, os.path.join(work, "res-per-block"), "per-block")
check(res_pred.get("saved_bytes") == res_pb["recorded"]["saved_bytes_at_backward"],
      "ResNet per-block: predicted saved bytes %r, measured %d" % (res_pred.get("saved_bytes"),
                                                                  res_pb["recorded"]["saved_bytes_at_backward"]))

# docs/own-model.md's Hugging Face-style example, run as written there (in a directory of its
# own): the same loss planned and unplanned, the prediction of segments:2 measured to the byte.
with open(os.path.join(args.source_dir, "docs", "own-model.md")) as f:
    doc = f.read()
example = doc.split("## A Hugging Face-style model", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
hf_dir = os.path.join(work, "hf-example")
os.makedirs(hf_dir)
cwd = os.getcwd()
os.chdir(hf_dir)
try:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example, "docs/own-model.md (Hugging Face-style example)", "exec"), {"__name__": "example"})
finally:
    os.chdir(cwd)
losses = printed.getvalue().split()
check(len(losses) == 2 and losses[0] == losses[1], "the documented example: the same loss planned and not: %r" % losses)
hf_pred = batch.json("plan", "--from-run", os.path.join(hf_dir, "runs", "hf-none"), "--policy", "segments:2",
                     "--json") or {}
hf_meas = summary(os.path.join(hf_dir, "runs", "hf-segments2"))
check(hf_pred.get("saved_bytes") == hf_meas["recorded"]["saved_bytes_at_backward"]
      and hf_pred.get("recompute_flops") == hf_meas["flops"]["recompute"],
      "the documented example: predicted %r / %r, measured %r / %r" % (
          hf_pred.get("saved_bytes"), hf_pred.get("recompute_flops"), hf_meas["recorded"]["saved_bytes_at_backward"],
          hf_meas["flops"]["recompute"]))
check("measures {:,} bytes".format(hf_meas["recorded"]["saved_bytes_at_backward"]) in " ".join(doc.split()),
      "docs/own-model.md states the measured saved bytes of its example (%d)" % hf_meas["recorded"]["saved_bytes_at_backward"])

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
check(rec.op_outputs == [], "a step under no_grad records no op outputs")
p = batch.json("plan", "--from-run", empty, "--policy", "selective:keep=matmul", "--json")
check(p is not None and p["saved_bytes"] == 0 and p["kept_output_bytes"] == 0,
      "a selective plan of a step that saved nothing predicts 0 bytes")

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

# The profiler's events as the recorder reads them (compat.stop_profiler: its raw events, torch's
# own parse skipped) are torch's parsed events: the same names, times, sequence numbers, FLOPs,
# memory and tree, event by event, for a checkpointed step (recompute, backward, optimizer).
from rematlab.profiled_ops import lean_events  # noqa: E402
from torch.autograd import DeviceType  # noqa: E402
from torch.autograd.profiler_util import EventList  # noqa: E402

torch.manual_seed(0)
lm = models.CrossDecoder(vocab=128, hidden=32, heads=4, layers=3)
lopt = torch.optim.AdamW(lm.parameters(), lr=1e-3)
lx, ly = models.batch(128, batch=2, seq=16)
rematlab.checkpoint_plan(lm, "segments:2")
with rematlab.record(os.path.join(work, "lean"), model=lm, optimizer=lopt) as lrec:
    lloss = lm(lx, ly)
    lloss.backward()
    lopt.step()
    lrec.loss(lloss)
inner = lrec._prof.profiler
theirs = EventList(type(inner)._parse_kineto_results(inner, inner.kineto_results))
theirs._build_tree()
ours = lean_events(inner.kineto_results, DeviceType)


def described(events):
    at = {id(e): i for i, e in enumerate(events)}
    return [(e.name, e.time_range.start, e.time_range.end, e.sequence_nr, e.flops, str(e.device_type),
             e.cpu_memory_usage, e.self_cpu_memory_usage, at.get(id(e.cpu_parent)), len(e.cpu_children))
            for e in events]


mine, torchs = described(ours), described(theirs)
differ = [i for i, (a, b) in enumerate(zip(mine, torchs)) if a != b]
check(len(mine) == len(torchs) > 1000 and not differ,
      "the recorder's events = torch's parse of the same profile: %d and %d events, %d differ%s"
      % (len(mine), len(torchs), len(differ), ": %s / %s" % (mine[differ[0]], torchs[differ[0]]) if differ else ""))
check(any(e.name.startswith("autograd::engine::evaluate_function") for e in ours) and
      any(e.name == "[memory]" for e in ours) and any(e.cpu_parent is not None for e in ours),
      "the compared events hold backward nodes, memory records and a tree")

# With a torch whose raw events the recorder cannot read (a stand-in: lean_events raising as on
# another API), torch's own parse gives the same recording: its FLOP-counting ops with their
# phases and modules, and every module call's FLOPs.
import rematlab.profiled_ops as profiled_ops  # noqa: E402


def cross_step(out):
    torch.manual_seed(0)
    cm = models.CrossDecoder(vocab=128, hidden=32, heads=4, layers=3)
    copt = torch.optim.AdamW(cm.parameters(), lr=1e-3)
    rematlab.checkpoint_plan(cm, "segments:2")
    with rematlab.record(out, model=cm, optimizer=copt) as crec:
        closs = cm(lx, ly)
        closs.backward()
        copt.step()
        crec.loss(closs)
    # The ops that count FLOPs (the small ones around them vary from run to run: allocations the
    # hooks make), and every module call's FLOPs.
    ops = [(r["name"], r["phase"], r["op"], r["flops"]) for r in csv_rows(os.path.join(out, "ops.csv"))
           if r["flops"] != "0"]
    calls = [(r["module"], r["phase"], r["flops"]) for r in csv_rows(os.path.join(out, "module_calls.csv"))]
    return ops, calls


lean_ops = cross_step(os.path.join(work, "lean-read"))
real_lean = profiled_ops.lean_events


def unreadable(*a, **k):
    raise AttributeError("a stand-in torch without start_us()")


profiled_ops.lean_events = unreadable
try:
    parsed_ops = cross_step(os.path.join(work, "torch-parse"))
finally:
    profiled_ops.lean_events = real_lean
check(lean_ops == parsed_ops and len(lean_ops[0]) > 50,
      "the recording read from raw events = the one from torch's parse (%d and %d ops)"
      % (len(lean_ops[0]), len(parsed_ops[0])))

code = exit_code("recorder e2e ok")
if code == 0:
    shutil.rmtree(work, ignore_errors=True)
else:
    print("kept " + work)
sys.exit(code)
