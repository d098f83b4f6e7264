#!/usr/bin/python3
"""One GPT-2 training step in PyTorch on the CPU, timed, for the shapes of a RematLab preset.

The model is RematLab's GPT-2 (LayerNorm, tanh GELU, biases, learned positions, head tied to the
token embedding, causal attention written out as softmax(q k^T / sqrt(d)) v, dropout after the
embedding, on the attention probabilities and on both residual branches), trained with AdamW
(lr 1e-3, betas 0.9 / 0.95, eps 1e-8, weight decay 0.1 on matrices) on random tokens. A step is
forward, backward and the optimizer step. dtype bf16: parameters and activations in bfloat16
(PyTorch's plain bf16 model; its AdamW updates the bf16 parameters, without fp32 master
weights), fp32: everything in float32.

Prints one JSON line: {"model", "dtype", "seq", "batch", "threads", "step_ms": [...], "median_ms"}.

Usage: /usr/bin/python3 bench/pytorch_step.py PRESET_JSON [--dtype bf16|fp32] [--seq N]
       [--batch N] [--steps N] [--warmup N] [--threads N]
Standard library and torch only. Set OMP_WAIT_POLICY=PASSIVE in the environment (before the
interpreter starts) so idle OpenMP threads sleep instead of spinning between ops.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

EPS = 1e-5


def make_params(c, dtype, gen):
    h, f, V, P, L = c["hidden"], c["ffn"], c["vocab"], c["positions"], c["layers"]
    resid = 0.02 / math.sqrt(2 * L)

    def normal(shape, std):
        return (torch.randn(shape, generator=gen) * std).to(dtype).requires_grad_()

    def const(shape, v):
        return torch.full(shape, v).to(dtype).requires_grad_()

    w = {"wte": normal((V, h), 0.02), "wpe": normal((P, h), 0.02),
         "lnf_w": const((h,), 1.0), "lnf_b": const((h,), 0.0)}
    for l in range(L):
        p = f"h{l}."
        w[p + "ln1_w"], w[p + "ln1_b"] = const((h,), 1.0), const((h,), 0.0)
        w[p + "qkv_w"], w[p + "qkv_b"] = normal((3 * h, h), 0.02), const((3 * h,), 0.0)
        w[p + "proj_w"], w[p + "proj_b"] = normal((h, h), resid), const((h,), 0.0)
        w[p + "ln2_w"], w[p + "ln2_b"] = const((h,), 1.0), const((h,), 0.0)
        w[p + "fc_w"], w[p + "fc_b"] = normal((f, h), 0.02), const((f,), 0.0)
        w[p + "fc2_w"], w[p + "fc2_b"] = normal((h, f), resid), const((h,), 0.0)
    return w


def forward(w, c, idx, tgt, p):
    B, S = idx.shape
    h, a = c["hidden"], c["heads"]
    d = h // a
    x = F.dropout(w["wte"][idx] + w["wpe"][:S], p)
    mask = torch.ones(S, S, dtype=torch.bool).tril()
    for l in range(c["layers"]):
        q = f"h{l}."
        y = F.layer_norm(x, (h,), w[q + "ln1_w"], w[q + "ln1_b"], EPS)
        qkv = F.linear(y, w[q + "qkv_w"], w[q + "qkv_b"])
        qh, kh, vh = [t.view(B, S, a, d).transpose(1, 2) for t in qkv.split(h, dim=2)]
        att = (qh @ kh.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        att = F.dropout(att.masked_fill(~mask, float("-inf")).softmax(dim=-1), p)
        ctx = (att @ vh).transpose(1, 2).reshape(B, S, h)
        x = x + F.dropout(F.linear(ctx, w[q + "proj_w"], w[q + "proj_b"]), p)
        y = F.layer_norm(x, (h,), w[q + "ln2_w"], w[q + "ln2_b"], EPS)
        y = F.gelu(F.linear(y, w[q + "fc_w"], w[q + "fc_b"]), approximate="tanh")
        x = x + F.dropout(F.linear(y, w[q + "fc2_w"], w[q + "fc2_b"]), p)
    x = F.layer_norm(x, (h,), w["lnf_w"], w["lnf_b"], EPS)
    logits = F.linear(x, w["wte"])
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tgt.reshape(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("preset", help="a RematLab model file (resources/presets/NAME.json)")
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--seq", type=int)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    with open(args.preset) as f:
        c = json.load(f)
    if c.get("architecture") != "gpt2":
        sys.exit(f"pytorch_step.py: only GPT-2 presets, {args.preset} is {c.get('architecture')}")
    if args.seq:
        c["seq"] = args.seq
        c["positions"] = max(c["positions"], args.seq)
    if args.batch:
        c["batch"] = args.batch
    if args.steps < 1 or args.warmup < 0 or args.threads < 1:
        sys.exit("pytorch_step.py: --steps >= 1, --warmup >= 0 and --threads >= 1")
    torch.set_num_threads(args.threads)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    gen = torch.Generator().manual_seed(1234)
    w = make_params(c, dtype, gen)
    decay = [t for n, t in w.items() if t.dim() == 2]
    rest = [t for n, t in w.items() if t.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    B, S, V = c["batch"], c["seq"], c["vocab"]
    p = float(c.get("dropout", 0.0))
    times = []
    for step in range(args.warmup + args.steps):
        tok = torch.randint(0, V, (B, S + 1), generator=gen)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = forward(w, c, tok[:, :-1], tok[:, 1:], p)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        if not math.isfinite(loss.item()):
            sys.exit(f"pytorch_step.py: the loss of step {step} is {loss.item()}")
        if step >= args.warmup:
            times.append((t1 - t0) * 1e3)
    print(json.dumps({"model": c["name"], "dtype": args.dtype, "seq": S, "batch": B,
                      "threads": torch.get_num_threads(), "step_ms": times,
                      "median_ms": statistics.median(times)}))


if __name__ == "__main__":
    main()
