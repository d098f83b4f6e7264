"""Every model family's training step against a float64 PyTorch reference, from outside.

For each family: a Hugging Face config.json, random weights (safetensors, Hugging Face names)
and token ids (.npy) from tests/reference/families.py; `rematlab-batch run` trains 3 AdamW steps
on them (--load-weights, --tokens, --dump-batch, --save-weights, --out); the reference trains
on the windows the run dumped, in float64 and in float32. The run's losses (loss.csv) must be
within 1e-6 of float64's at every step, and each tensor it saved within
max(1e-4, 4 x the float32-float64 gap of that tensor) of float64's. The comparison is shown to
fail for references that differ from the step in one thing each (learning rate, beta2, no
decay, decay on norms and biases, one weight moved by 1e-3).
The reference is also checked against itself (families_checks.py).

Families in ENABLED are checked; REMAT_FAMILIES=all (or a comma-separated list) checks others.
Needs Debian's python3-torch; without it the test skips (exit 77).
"""
import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_common  # noqa: E402
from e2e_common import check  # noqa: E402

ENABLED = ["gpt2", "llama", "llama3", "qwen2", "phi3", "olmo2", "gpt2_flags", "llama_bias", "gemma",
           "mistral", "gemma2", "qwen3", "granite", "gpt_neox", "falcon", "falcon_rw", "gemma3",
           "gemma3_types", "qwen2_window", "smollm3", "mixtral", "qwen3_moe", "qwen2_moe", "deepseek_v3",
           "deepseek_v2", "gpt_oss", "mixtral_aux", "qwen3_moe_aux", "gpt_oss_aux", "llama4_text", "llama4_text_top2"]
# Families whose windows are shorter than SEQ also run with flash attention (banded tiles).
FLASH_TOO = ["mistral", "gemma2", "gemma3", "gemma3_types", "qwen2_window", "gpt_oss", "llama4_text"]

STEPS = 3
# Not the defaults, so that each option visibly reaches the optimizer. A large eps keeps Adam's
# update smooth in the gradient: with eps 1e-8, gradients that are rounding noise (GPT-2's and
# Qwen2's k biases get none in exact arithmetic) or tiny get a full +-lr step whose sign float32
# picks, and the float32-float64 gap after 3 steps reaches 1e-3 in the weights and 1e-5 in
# the loss; at eps 1e-3 it stays near 1e-6 and 7e-7.
OPT = dict(lr=0.003, beta1=0.8, beta2=0.99, eps=1e-3, weight_decay=0.1)
LOSS_TOL = 1e-6
WEIGHT_TOL = 1e-4
SKIP = 77


def chosen_families(all_families):
    env = os.environ.get("REMAT_FAMILIES", "").strip()
    if not env:
        return list(ENABLED)
    if env == "all":
        return list(all_families)
    names = [n.strip() for n in env.split(",") if n.strip()]
    for n in names:
        check(n in all_families, "REMAT_FAMILIES: unknown family %r (known: %s)" % (n, ", ".join(all_families)))
    return [n for n in names if n in all_families]


def run_losses(run_dir):
    with open(os.path.join(run_dir, "loss.csv"), newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [float(r["loss"]) for r in rows if r["counted"] == "1"]


def compare(fam, torch, losses, weights, ref64, ref32):
    """Problems of a run's (losses, weights) against the float64 reference, with the float32
    reference as the floor; (problems, worst loss gap, loss floor, worst weight gap, worst weight
    floor)."""
    problems = []
    l64, w64 = ref64
    l32, w32 = ref32
    if len(losses) != len(l64):
        return ["%s: %d counted losses, expected %d" % (fam, len(losses), len(l64))], 0, 0, 0, 0
    gaps = [abs(a - b) for a, b in zip(losses, l64)]
    loss_floor = max(abs(a - b) for a, b in zip(l32, l64))
    for k, g in enumerate(gaps):
        if g > LOSS_TOL:
            problems.append("%s: step %d loss %.9f, float64 reference %.9f (|d| %.2e > %.0e)"
                            % (fam, k, losses[k], l64[k], g, LOSS_TOL))
    if sorted(weights) != sorted(w64):
        problems.append("%s: saved tensors %s, reference %s" % (fam, sorted(weights), sorted(w64)))
        return problems, max(gaps), loss_floor, 0, 0
    worst, worst_floor = 0.0, 0.0
    for name, ref in w64.items():
        got = weights[name].to(torch.float64)
        if tuple(got.shape) != tuple(ref.shape):
            problems.append("%s: %s shape %s, reference %s" % (fam, name, tuple(got.shape), tuple(ref.shape)))
            continue
        floor = (w32[name].to(torch.float64) - ref).abs().max().item()
        tol = max(WEIGHT_TOL, 4 * floor)
        gap = (got - ref).abs().max().item()
        worst, worst_floor = max(worst, gap), max(worst_floor, floor)
        if gap > tol:
            problems.append("%s: %s after %d steps: max |d| %.2e > %.2e (float32 floor %.2e)"
                            % (fam, name, STEPS, gap, tol, floor))
    return problems, max(gaps), loss_floor, worst, worst_floor


def check_controls(name, families, torch, w0, f, windows, run, ref32):
    """The comparison can fail: references that differ from the step in one thing each must
    not match the run (each is a way the engine could be wrong)."""
    def train(weights=w0, decay_rule=families.decays, feat=f, **changes):
        return families.train(weights, feat, windows, dtype=torch.float64, decay_rule=decay_rule,
                              **dict(OPT, **changes))

    moved = {n: t.clone() for n, t in w0.items()}
    first = sorted(n for n in moved if moved[n].dim() == 2)[0]
    moved[first].view(-1)[0] += 1e-3
    controls = [("lr x 1.1", train(lr=OPT["lr"] * 1.1)),
                ("beta2 0.5", train(beta2=0.5)),
                ("no weight decay", train(weight_decay=0.0)),
                ("decay on norm weights and biases too", train(decay_rule=lambda name, shape: True)),
                ("%s[0] moved by 1e-3" % first, train(weights=moved))]
    # The family's own features must each matter: a window shorter than the sequence, its
    # alternation over blocks, the soft-caps, the QK-norm, the multipliers and the score scale.
    if 0 < f["sliding_window"] < families.SEQ:
        controls.append(("no sliding window", train(feat=dict(f, sliding_window=0))))
        if f.get("layer_types"):  # the list's pattern, not the family's
            controls.append(("the family's pattern instead of layer_types", train(feat=dict(f, layer_types=None))))
        elif f.get("sliding_window_pattern"):
            controls.append(("the window on every block",
                             train(feat=dict(f, sliding_window_layers="all", sliding_window_pattern=0))))
        else:
            other = "all" if f["sliding_window_layers"] == "even" else "even"
            controls.append(("the window on %s blocks" % other, train(feat=dict(f, sliding_window_layers=other))))
    if f.get("rope_local_theta"):
        controls.append(("one RoPE for every layer", train(feat=dict(f, rope_local_theta=0.0))))
    for cap in ("attn_softcap", "final_softcap"):
        if f[cap]:
            controls.append(("no %s" % cap, train(feat=dict(f, **{cap: 0.0}))))
    if f["qk_norm"] != "none":
        controls.append(("no QK-norm", train(feat=dict(f, qk_norm="none"))))
    for mult in ("embedding_multiplier", "residual_multiplier", "logits_scaling"):
        if f[mult] != 1.0:
            controls.append(("%s 1" % mult, train(feat=dict(f, **{mult: 1.0}))))
    if f["block_layout"] != "sequential" and f["names"] != "falcon":  # (Falcon's norms are named by layout)
        controls.append(("a sequential block", train(feat=dict(f, block_layout="sequential"))))
    if f["position"] == "rope" and f["partial_rotary_factor"] < 1.0 and not f["rope_scaling"]:
        controls.append(("every dim rotated", train(feat=dict(f, partial_rotary_factor=1.0))))
    if f.get("moe"):  # the routing's own features: renormalised or not, how many experts, which layers
        e = f["moe"]
        controls.append(("top-k weights %s" % ("not renormalised" if e["norm"] else "renormalised"),
                         train(feat=dict(f, moe=dict(e, norm=not e["norm"])))))
        controls.append(("top-%d routing" % (e["top_k"] - 1), train(feat=dict(f, moe=dict(e, top_k=e["top_k"] - 1)))))
        if e.get("shared"):
            controls.append(("no shared expert", train(feat=dict(f, moe=dict(e, shared=0)))))
        if e.get("aux_coef"):
            controls.append(("no load-balancing loss", train(feat=dict(f, moe=dict(e, aux_coef=0.0)))))
            controls.append(("the load-balancing loss without its gradient",
                             train(feat=dict(f, moe=dict(e, aux_detached=True)))))
        if e.get("kind") == "gpt_oss":  # its router's bias, the clamp, the interleaved gate|up
            controls.append(("no router bias", train(feat=dict(f, moe=dict(e, router_bias=False)))))
            controls.append(("no clamp", train(feat=dict(f, moe=dict(e, limit=None)))))
            controls.append(("gate|up in halves", train(feat=dict(f, moe=dict(e, interleaved=False)))))
        if e.get("kind") == "llama4":  # the router's weight on the expert's input; gate|up in halves
            controls.append(("router weights on the experts' output", train(feat=dict(f, moe=dict(e, weight_on="output")))))
            controls.append(("gate|up interleaved", train(feat=dict(f, moe=dict(e, interleaved=True)))))
    if f["names"] == "llama4":  # chunks, the temperature, the complex RoPE pairs
        controls.append(("no attention chunks", train(feat=dict(f, attention_chunk=0))))
        controls.append(("no temperature tuning", train(feat=dict(f, attn_temperature_tuning=False))))
        controls.append(("rotate-half RoPE pairs", train(feat=dict(f, rope_pairs="half"))))
    if f.get("sinks"):
        controls.append(("no attention sinks", train(feat=dict(f, sinks=False))))
    if f["attn_scale"] and f["names"] != "gpt2":
        controls.append(("scores scaled by 1/sqrt(head_dim)", train(feat=dict(f, attn_scale=0.0))))
    for what, ref in controls:
        check(compare(name, torch, run[0], run[1], ref, ref32)[0],
              "%s: a reference with %s should not match the run" % (name, what))


def check_routing(label, families, torch, w0, f, windows, run_dir):
    """routing.csv against the reference's softmax router (mixtures.forward): the choices per
    expert of each sparse layer in the last step, from the weights the previous steps left."""
    counts = []
    _, before = families.train(w0, f, windows[:-1], dtype=torch.float32, **OPT)
    with torch.no_grad():
        families.forward(before, f, windows[-1][:, :-1], route_counts=counts)
    recorded, kept = {}, True
    with open(os.path.join(run_dir, "routing.csv")) as fh:
        for r in csv.DictReader(fh):
            recorded.setdefault(int(r["layer"]), []).append(int(r["routed"]))
            kept = kept and r["kept"] == r["routed"]
    check(list(recorded.values()) == counts and counts,
          "%s: routing.csv %s, the reference's choices per expert %s" % (label, recorded, counts))
    check(kept, "%s: routing.csv drops choices of a dropless router" % label)


def check_family(b, families, torch, name, work, seed, attention="naive"):
    d, f, w0 = families.write_family(name, work, seed)
    label = name if attention == "naive" else "%s (%s)" % (name, attention)
    out, dump, run_dir = (os.path.join(d, attention + "-" + n) for n in ("out.safetensors", "batch.npy", "run"))
    args = ["run", "--model", os.path.join(d, "config.json"), "--dtype", "fp32", "--attention", attention,
            "--seq", families.SEQ, "--batch", families.BATCH, "--seed", seed,
            "--load-weights", os.path.join(d, "weights.safetensors"), "--tokens", os.path.join(d, "tokens.npy"),
            "--steps", STEPS, "--warmup", 0, "--lr", OPT["lr"], "--beta1", OPT["beta1"], "--beta2", OPT["beta2"],
            "--eps", OPT["eps"], "--weight-decay", OPT["weight_decay"],
            "--dump-batch", dump, "--save-weights", out, "--out", run_dir]
    p = subprocess.run([b.binary] + [str(x) for x in args], capture_output=True, text=True, env=b.env, timeout=600)
    if p.returncode != 0:
        # A family the engine does not train yet must be refused with one line saying why.
        lines = p.stderr.strip().splitlines()
        check(False, "%s: rematlab-batch exited %d: %s" % (label, p.returncode, " | ".join(lines)[-1000:]))
        check(p.returncode == 1 and len(lines) == 1 and "Traceback" not in p.stderr and "terminate" not in p.stderr,
              "%s: the refusal is not one clean line with exit 1" % label)
        return
    windows = torch.from_numpy(families.np.load(dump).astype("int64"))
    if not check(tuple(windows.shape) == (STEPS, families.BATCH, families.SEQ + 1),
                 "%s: dumped batch shape %s" % (label, tuple(windows.shape))):
        return
    run = (run_losses(run_dir), {n: torch.tensor(v, dtype=torch.float32).reshape(shape)
                                 for n, (shape, v) in e2e_common.read_safetensors(out).items()})
    ref64 = families.train(w0, f, windows, dtype=torch.float64, **OPT)
    ref32 = families.train(w0, f, windows, dtype=torch.float32, **OPT)
    problems, loss_gap, loss_floor, worst, floor = compare(label, torch, run[0], run[1], ref64, ref32)
    for msg in problems:
        check(False, msg)
    print("%-16s losses %s  |d loss| %.1e (tol %.0e, float32 floor %.1e)  weights max |d| %.1e "
          "(tol max(%.0e, 4 x floor), float32 floor %.1e)"
          % (label, " ".join("%.6f" % x for x in run[0]), loss_gap, LOSS_TOL, loss_floor, worst, WEIGHT_TOL, floor),
          flush=True)
    check_controls(label, families, torch, w0, f, windows, run, ref32)
    e = f.get("moe") or {}
    if e and not e.get("scoring") and not e.get("kind"):  # the softmax routers
        check_routing(label, families, torch, w0, f, windows, run_dir)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("SKIP: python3-torch is not installed, the family reference checks need it")
        return SKIP
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
    import families
    import families_checks
    torch.set_num_threads(1)

    checks = families_checks.self_checks()
    for desc, ok, detail in checks:
        check(ok, "reference self-check: %s %s" % (desc, detail))
    print("%d of %d checks of the reference against itself pass" % (sum(c[1] for c in checks), len(checks)))
    names = chosen_families(list(families.FAMILIES))
    left = [n for n in families.FAMILIES if n not in names]
    if left:
        print("not run through rematlab-batch (REMAT_FAMILIES=all runs them): " + ", ".join(left))
    b = e2e_common.Batch(os.path.abspath(a.bin))
    work = tempfile.mkdtemp(prefix="rematlab-families-")
    try:
        order = list(families.FAMILIES)
        for name in names:  # each family's seed, whichever others run (as families.py DIR)
            check_family(b, families, torch, name, work, 100 + order.index(name))
            if name in FLASH_TOO:
                check_family(b, families, torch, name, work, 100 + order.index(name), "flash")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return e2e_common.exit_code("families match the float64 reference: " + ", ".join(names))


if __name__ == "__main__":
    sys.exit(main())
