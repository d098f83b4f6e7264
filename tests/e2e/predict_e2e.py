"""rematlab.predict and `python -m rematlab`, installed as the docs say: the package (python/ and
the engine's sources beside it, copied) is pip-installed offline into a fresh virtual environment
that sees Debian's torch, which compiles rematlab._predictor with pybind11; then, in that
environment, outside the checkout:
  - every plan's prediction against a recording of the planned step: saved bytes and the peak
    without the recompute (what a recording measures) equal to the byte, the peak with the
    recompute no lower, on a chained model with AdamW (peak at the forward's end or the
    optimizer) and Hugging Face-style layers with SGD;
  - the refusals: a bad plan before the step runs, no plan, a model with a plan applied;
  - the shell entry point: predict, record and plan --from-run agree with the API and with
    rematlab-batch plan --from-run; bad input exits 1 with one line, the user's exception shows
    its traceback, no command exits 2;
  - the package run from a checkout without the extension says how to build it;
  - docs/own-model.md's table of predictions is this test's chained model's.
Exits 77 (skipped) without torch."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from e2e_common import check, exit_code  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--source-dir", required=True)
ap.add_argument("--bin", required=True)
ap.add_argument("--inside", help="(run in the virtual environment) the scratch directory")
args = ap.parse_args()

PLANS = ["none", "per-block", "every:2", "segments:2", "sqrt"]

ENTRY = '''
import torch, torch.nn as nn, torch.nn.functional as F

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm, self.fc, self.out = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
    def forward(self, x):
        return x + self.out(F.gelu(self.fc(self.norm(x))))

class Chained(nn.Module):
    def __init__(self, vocab=256, d=64, n=4):
        super().__init__()
        self.emb, self.blocks = nn.Embedding(vocab, d), nn.ModuleList(Block(d) for _ in range(n))
    def forward(self, idx, targets):
        x = self.emb(idx)
        for b in self.blocks:
            x = b(x)
        return F.cross_entropy((x @ self.emb.weight.t()).flatten(0, 1), targets.flatten())

class Layer(nn.Module):  # as transformers writes one: a keyword mask, a tuple out
    def __init__(self, d, heads):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(d)
        self.self_attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
    def forward(self, hidden_states, attention_mask=None):
        h = self.input_layernorm(hidden_states)
        attn, weights = self.self_attn(h, h, h, attn_mask=attention_mask)
        hidden_states = hidden_states + attn
        return hidden_states + self.mlp(hidden_states), weights

class HfStyle(nn.Module):
    def __init__(self, vocab=512, d=32, heads=4, n=4):
        super().__init__()
        self.embed_tokens, self.lm_head = nn.Embedding(vocab, d), nn.Linear(d, vocab, bias=False)
        self.layers = nn.ModuleList(Layer(d, heads) for _ in range(n))
    def forward(self, input_ids, labels):
        s = input_ids.shape[1]
        mask = torch.full((s, s), float("-inf")).triu(1)
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x, attention_mask=mask)[0]
        return F.cross_entropy(self.lm_head(x).flatten(0, 1), labels.flatten())

def make(kind="chained"):
    torch.manual_seed(0)
    if kind == "chained":
        model, vocab = Chained(), 256
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    else:
        model, vocab = HfStyle(), 512
        opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    idx = torch.randint(0, vocab, (8, 65) if kind == "chained" else (4, 33))
    def step():
        loss = model(idx[:, :-1], idx[:, 1:])
        loss.backward()
        opt.step()
        return loss
    return model, step, opt

def make_hf():
    return make("hf")

def not_a_step():
    return 42

def raises():
    raise KeyError("raised by the entry itself")

def not_a_model():
    return 3, lambda: None
'''


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def outside():
    """Installs the package into a fresh virtual environment, then runs this script there."""
    try:
        import torch  # noqa: F401
    except ImportError:
        print("skipped: no torch for %s" % sys.executable)
        return 77
    scratch = tempfile.mkdtemp(prefix="rematlab-predict-e2e-")
    try:
        src = os.path.join(scratch, "src")
        shutil.copytree(os.path.join(args.source_dir, "core"), os.path.join(src, "core"))
        shutil.copytree(os.path.join(args.source_dir, "python"), os.path.join(src, "python"),
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "_predictor*.so", "__pycache__"))
        venv = os.path.join(scratch, "venv")
        r = run([sys.executable, "-m", "venv", "--system-site-packages", venv])
        if not check(r.returncode == 0, "python3 -m venv: %s" % r.stderr[-400:]):
            return exit_code()
        py = os.path.join(venv, "bin", "python")
        r = run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index", os.path.join(src, "python")])
        if not check(r.returncode == 0, "pip install --no-build-isolation --no-index ./python:\n%s%s"
                     % (r.stdout[-2000:], r.stderr[-2000:])):
            return exit_code()
        print("installed into %s" % venv, flush=True)
        # The checkout's package without the extension (as PYTHONPATH=python uses it).
        bare = run([sys.executable, "-c", "import sys; sys.path.insert(0, %r); import rematlab, torch\n"
                    "try:\n    rematlab.predict(torch.nn.Linear(1, 1), lambda: None)\n"
                    "except RuntimeError as e:\n    print(e)\n" % os.path.join(src, "python")])
        check("pip install --no-build-isolation ./python" in bare.stdout and "build_ext --inplace" in bare.stdout,
              "without the extension rematlab.predict says how to build it: %s %s" % (bare.stdout, bare.stderr[-500:]))
        work = os.path.join(scratch, "work")
        os.makedirs(work)
        with open(os.path.join(work, "entry.py"), "w") as f:
            f.write(ENTRY)
        child = subprocess.run([py, os.path.abspath(__file__), "--source-dir", args.source_dir, "--bin", args.bin,
                                "--inside", work], cwd=work)
        return child.returncode
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def inside(work):
    import rematlab
    check(os.path.realpath(rematlab.__file__).startswith(os.path.realpath(sys.prefix)),
          "rematlab comes from the virtual environment: %s" % rematlab.__file__)
    sys.path.insert(0, work)
    import entry

    def planned(kind, plan, out):
        model, step, opt = entry.make(kind)
        if plan != "none":
            rematlab.checkpoint_plan(model, plan)
        with rematlab.record(out, model=model, optimizer=opt) as rec:
            rec.loss(step())
        return rec.summary

    raised_by_recompute = False
    for kind, glob in (("chained", "modules:blocks.*.fc"), ("hf", "modules:layers.*.mlp")):
        model, step, opt = entry.make(kind)
        preds = rematlab.predict(model, step, plan=PLANS + [glob], optimizer=opt)
        check(sorted(preds) == sorted(PLANS + [glob]), "%s: one prediction per plan: %s" % (kind, sorted(preds)))
        none = preds["none"]
        check(none.saved_bytes == none.recorded_saved_bytes and none.peak_bytes == none.recorded_peak_bytes
              == none.held_peak_bytes and none.recompute_flops == 0,
              "%s: none is the step as recorded: %r" % (kind, none.raw))
        for plan in PLANS[1:] + [glob]:
            p = preds[plan]
            s = planned(kind, plan, os.path.join(work, "%s-%s" % (kind, plan.replace(":", "_").replace("*", "x"))))
            measured = s["recorded"]["saved_bytes_at_backward"]
            check(p.saved_bytes == measured, "%s %s: saved %d predicted, %d measured" % (kind, plan, p.saved_bytes,
                                                                                        measured))
            check(p.held_peak_bytes == s["peak_bytes"], "%s %s: peak without the recompute %d predicted, %d "
                  "measured" % (kind, plan, p.held_peak_bytes, s["peak_bytes"]))
            check(p.peak_bytes >= p.held_peak_bytes and p.recompute_flops > 0,
                  "%s %s: the recompute adds: %r" % (kind, plan, p.raw))
            raised_by_recompute = raised_by_recompute or p.peak_bytes > p.held_peak_bytes
            print("%s %-22s saved %8d  peak %8d  held peak %8d (measured %8d)" % (
                kind, plan, p.saved_bytes, p.peak_bytes, p.held_peak_bytes, s["peak_bytes"]), flush=True)
        if kind == "chained":  # docs/own-model.md's table is of this model and step
            with open(os.path.join(args.source_dir, "docs", "own-model.md")) as f:
                doc = f.read()
            for plan in ("none", "per-block", "segments:2"):
                p = preds[plan]
                row = "| `%s` | {:,} | {:,} | {:,} | {:,} |".format(
                    p.saved_bytes, p.peak_bytes, p.held_peak_bytes, p.recompute_flops) % plan
                check(row in doc, "docs/own-model.md states %s" % row)
    check(raised_by_recompute, "some plan's recompute raises its peak")

    # One plan gives one Prediction; a selective plan no peak.
    model, step, opt = entry.make()
    one = rematlab.predict(model, step, plan="per-block", optimizer=opt)
    check(isinstance(one, rematlab.Prediction) and one.plan == "per-block", "one plan, one Prediction: %r" % (one,))
    model, step, opt = entry.make()
    sel = rematlab.predict(model, step, plan="selective:keep=matmul", optimizer=opt)
    check(sel.peak_bytes is None and sel.held_peak_bytes is None and sel.saved_bytes > 0,
          "a selective plan has no predicted peak: %r" % (sel.raw,))

    # Refusals, before the step runs.
    ran = []
    for bad, why in (("bogus", "not one of none, per-block"), ([], "no plan given"),
                     ("every:0", "whole number of blocks")):
        try:
            rematlab.predict(model, lambda: ran.append(1), plan=bad)
            check(False, "plan %r refused" % (bad,))
        except ValueError as e:
            check(why in str(e), "plan %r refused saying %r: %s" % (bad, why, e))
    check(not ran, "a refused plan runs nothing")
    # A step that raises: its exception as it was, nothing left behind; a plan naming modules
    # the model lacks: said after the step, naming the plan; a model without parameters.
    class Mine(Exception):
        pass

    def bad_step():
        raise Mine("the step's own error")
    kept = os.path.join(work, "kept")
    try:
        rematlab.predict(model, bad_step, plan="per-block", out_dir=kept)
        check(False, "a step that raises raises")
    except Mine:
        pass
    check(not os.path.exists(kept), "a step that raised leaves no recording")
    model, step, opt = entry.make()
    try:
        rematlab.predict(model, step, plan="modules:decoder.*", optimizer=opt)
        check(False, "modules:decoder.* refused")
    except ValueError as e:
        check("checkpoint plan 'modules:decoder.*': no module path of the recorded run matches" in str(e),
              "a glob that matches nothing is named: %s" % e)
    import torch
    relu = torch.nn.ReLU()
    xin = torch.randn(4, 4, requires_grad=True)
    free = rematlab.predict(relu, lambda: relu(xin).sum().backward())
    check(free.saved_bytes == free.recorded_saved_bytes > 0, "a model without parameters: %r" % (free.raw,))
    try:
        rematlab.predict(relu, lambda: relu(xin).sum().backward(), plan="per-block")
        check(False, "per-block of a model without blocks refused")
    except ValueError as e:
        check("has no blocks" in str(e) and "modules:GLOB" in str(e), "no blocks, said with what to do: %s" % e)
    model, step, opt = entry.make()
    applied = rematlab.checkpoint_plan(model, "per-block")
    try:
        rematlab.predict(model, step)
        check(False, "a model with a plan applied is refused")
    except ValueError as e:
        check("remove() it first" in str(e), "the refusal says how: %s" % e)
    applied.remove()

    # The shell entry point.
    cli = [sys.executable, "-m", "rematlab"]
    r = run(cli + ["predict", "entry.py:make", "--plan", "none", "--plan", "per-block", "--json"], cwd=work)
    rows = json.loads(r.stdout) if r.returncode == 0 else []
    check(len(rows) == 2 and rows[1]["saved_bytes"] == one.saved_bytes and rows[1]["peak_bytes"] == one.peak_bytes,
          "python -m rematlab predict = rematlab.predict: %s %s" % (r.stdout[-600:], r.stderr[-600:]))
    r = run(cli + ["predict", "entry.py:make_hf", "--plan", "segments:2"], cwd=work)
    check(r.returncode == 0 and "segments:2" in r.stdout and "peak without recompute" in r.stdout,
          "predict prints a table: %s %s" % (r.stdout, r.stderr[-600:]))
    r = run(cli + ["record", "entry.py:make", "--out", "rec"], cwd=work)
    check(r.returncode == 0 and "recorded" in r.stdout, "record: %s %s" % (r.stdout, r.stderr[-600:]))
    r = run(cli + ["plan", "--from-run", "rec", "--plan", "per-block", "--json"], cwd=work)
    ours = json.loads(r.stdout)[0] if r.returncode == 0 else {}
    batch = run([args.bin, "plan", "--from-run", "rec", "--policy", "per-block", "--json"], cwd=work)
    theirs = json.loads(batch.stdout) if batch.returncode == 0 else {}
    check(ours.get("saved_bytes") == one.saved_bytes and ours.get("peak_bytes") == one.peak_bytes,
          "plan --from-run = predict: %s %s" % (r.stdout[-600:], r.stderr[-600:]))
    check(theirs and all(theirs[k] == ours[k] for k in ("saved_bytes", "peak_bytes", "held_peak_bytes",
                                                         "recompute_flops", "recorded_peak_bytes")),
          "the package's predictor = rematlab-batch plan --from-run: %s / %s" % (ours, theirs))
    for argv, rc, said in ((["predict", "entry.py:make", "--plan", "bogus"], 1, "checkpoint plan 'bogus'"),
                           (["predict", "entry.py:not_a_step"], 1, "not_a_step() returned int"),
                           (["predict", "entry.py:nothing_here"], 1, "has no function nothing_here"),
                           (["predict", "missing.py:make"], 1, "no file missing.py"),
                           (["predict", "no_such.module:make"], 1, "no module no_such.module"),
                           (["predict", "entry.py:not_a_model"], 1, "is a int, not a torch.nn.Module"),
                           (["predict", "entry.py"], 1, "FILE.py:FUNC"),
                           (["record", "entry.py:make", "--out", "rec"], 1, "exists"),
                           (["plan", "--from-run", "nowhere"], 1, "not a directory"),
                           (["plan", "--from-run", "."], 1, "summary.json"),
                           (["predict", "entry.py:raises"], 1, "KeyError: 'raised by the entry itself'"),
                           ([], 2, "required")):
        r = run(cli + argv, cwd=work)
        check(r.returncode == rc and said in r.stderr,
              "%s: exit %d saying %r, got %d: %s" % (" ".join(argv), rc, said, r.returncode, r.stderr[-600:]))
        check(argv[-1:] == ["entry.py:raises"] or "Traceback" not in r.stderr,
              "%s: one line, no traceback: %s" % (argv, r.stderr[-600:]))
    tb = run(cli + ["predict", "entry.py:raises"], cwd=work).stderr
    check("Traceback" in tb and "During handling" not in tb, "the user's own exception shows its own traceback: %s"
          % tb[-800:])
    return exit_code("predict: every prediction met its recording")


sys.exit(inside(args.inside) if args.inside else outside())
