#!/usr/bin/python3
"""One Mixtral-style training step in PyTorch eager on the CPU, timed, for the shapes of a
RematLab model file with a "moe" object (the dropless routing every layer).

The model: token embedding, per layer RMSNorm, q/k/v projections with grouped K/V heads, RoPE,
causal attention written out (softmax(q k^T / sqrt(d)) v: Debian's torch has no fused
attention), o_proj, RMSNorm, then the sparse block
as Hugging Face's MixtralSparseMoeBlock runs it in eager mode (router logits, softmax in fp32,
top-k, renormalised, and expert by expert: the tokens that chose it gathered, its SwiGLU MLP,
scaled and added back with index_add_), a final RMSNorm and an untied head; AdamW (lr 1e-3,
betas 0.9 / 0.95, weight decay 0.1 on matrices) on random tokens. bf16: parameters and
activations in bfloat16 (no fp32 master weights); fp32: float32.

Prints one JSON line: {"model", "dtype", "seq", "batch", "threads", "step_ms": [...], "median_ms"}.
Usage: /usr/bin/python3 bench/pytorch_moe_step.py MODEL_JSON [--dtype bf16|fp32] [--steps N]
       [--warmup N] [--threads N]
Standard library and torch only; set OMP_WAIT_POLICY=PASSIVE before the interpreter starts.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


def rms(x, w, eps=1e-6):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * w


def rope(x, cos, sin):
    h = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., h:], x[..., :h]), -1) * sin


def sparse_block(x, lw, E, k):
    probs = F.softmax(x @ lw["router"].t(), dim=-1, dtype=torch.float)
    top, chosen = torch.topk(probs, k, dim=-1)
    top = (top / top.sum(-1, keepdim=True)).to(x.dtype)
    out = torch.zeros_like(x)
    for e in range(E):
        token, slot = torch.where(chosen == e)
        if token.numel() == 0:
            continue
        xs = x[token]
        y = (F.silu(xs @ lw["gate"][e].t()) * (xs @ lw["up"][e].t())) @ lw["down"][e].t()
        out.index_add_(0, token, y * top[token, slot, None])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    c = json.load(open(a.model))
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    L, h, H, kv, V, S, B = c["layers"], c["hidden"], c["heads"], c["kv_heads"], c["vocab"], c["seq"], c["batch"]
    d = c.get("head_dim", h // H)
    E, k, f = c["moe"]["experts"], c["moe"]["top_k"], c["moe"]["ffn"]
    g = torch.Generator().manual_seed(0)

    def mat(*shape):
        return (torch.randn(*shape, generator=g) * 0.02).to(dt).requires_grad_()

    def ones(n):
        return torch.ones(n, dtype=dt, requires_grad=True)

    w = {"wte": mat(V, h), "head": mat(V, h), "lnf": ones(h)}
    layers = [dict(ln1=ones(h), q=mat(H * d, h), k=mat(kv * d, h), v=mat(kv * d, h), o=mat(h, H * d), ln2=ones(h),
                   router=mat(E, h), gate=mat(E, f, h), up=mat(E, f, h), down=mat(E, h, f)) for _ in range(L)]
    params = list(w.values()) + [t for lw in layers for t in lw.values()]
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    inv = 1.0 / (c.get("rope_theta", 10000.0) ** (torch.arange(0, d, 2).float() / d))
    emb = torch.arange(S).float()[:, None] * inv
    cos, sin = torch.cat((emb, emb), -1).cos().to(dt), torch.cat((emb, emb), -1).sin().to(dt)
    mask = torch.ones(S, S, dtype=torch.bool).tril()
    times = []
    for step in range(a.warmup + a.steps):
        tok = torch.randint(0, V, (B, S + 1), generator=g)
        t0 = time.perf_counter()
        x = w["wte"][tok[:, :-1]]
        for lw in layers:
            y = rms(x, lw["ln1"])
            q = rope((y @ lw["q"].t()).view(B, S, H, d).transpose(1, 2), cos, sin)
            kk = rope((y @ lw["k"].t()).view(B, S, kv, d).transpose(1, 2), cos, sin).repeat_interleave(H // kv, 1)
            v = (y @ lw["v"].t()).view(B, S, kv, d).transpose(1, 2).repeat_interleave(H // kv, 1)
            att = ((q @ kk.transpose(-1, -2)) * d ** -0.5).masked_fill(~mask, float("-inf")).softmax(-1) @ v
            x = x + att.transpose(1, 2).reshape(B, S, H * d) @ lw["o"].t()
            x = x + sparse_block(rms(x, lw["ln2"]).view(B * S, h), lw, E, k).view(B, S, h)
        logits = rms(x, w["lnf"]) @ w["head"].t()
        loss = F.cross_entropy(logits.float().view(-1, V), tok[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step >= a.warmup:
            times.append((time.perf_counter() - t0) * 1000)
    print(json.dumps({"model": c["name"], "dtype": a.dtype, "seq": S, "batch": B, "threads": a.threads,
                      "step_ms": times, "median_ms": statistics.median(times)}))


if __name__ == "__main__":
    main()
