#!/usr/bin/python3
"""PyTorch reference losses and gradients for RematLab's engine tests.

For each configuration: a PyTorch model with the same architecture as the engine (GPT-2:
LayerNorm, tanh GELU, biases, learned positions, tied head; Llama: RMSNorm, SwiGLU, RoPE in the
Hugging Face rotate_half layout, grouped-query attention, untied head), random weights from a
fixed seed, one batch of tokens. Writes, per configuration, <name>.weights.safetensors (Hugging
Face names), <name>.grads.safetensors (the gradient of the mean cross-entropy for every
weight, same names) and <name>.json (config, tokens, targets, loss).

Usage: /usr/bin/python3 make_reference.py OUT_DIR
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

CONFIGS = [
    dict(name="gpt2_1block", architecture="gpt2", layers=1, hidden=32, heads=4, kv_heads=4, ffn=128,
         seq=12, batch=2, vocab=40),
    dict(name="gpt2_2block", architecture="gpt2", layers=2, hidden=32, heads=4, kv_heads=4, ffn=128,
         seq=12, batch=2, vocab=40),
    dict(name="llama_1block", architecture="llama", layers=1, hidden=32, heads=4, kv_heads=2, ffn=56,
         seq=12, batch=2, vocab=40),
    dict(name="llama_2block", architecture="llama", layers=2, hidden=32, heads=4, kv_heads=2, ffn=56,
         seq=12, batch=2, vocab=40),
]
EPS = 1e-5
THETA = 10000.0


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to(torch.float32).contiguous()
        raw = t.numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def causal_attention(q, k, v):
    # q: [B, a, S, d], k/v: [B, a, S, d] (kv heads already repeated)
    S, d = q.shape[2], q.shape[3]
    att = (q @ k.transpose(-2, -1)) / math.sqrt(d)
    mask = torch.ones(S, S, dtype=torch.bool).tril()
    att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return att @ v


def gpt2_forward(w, c, idx):
    B, S = idx.shape
    h, a, L = c["hidden"], c["heads"], c["layers"]
    x = w["transformer.wte.weight"][idx] + w["transformer.wpe.weight"][:S]
    for l in range(L):
        p = f"transformer.h.{l}."
        y = F.layer_norm(x, (h,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], EPS)
        qkv = y @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = qkv.split(h, dim=2)
        q, k, v = [t.view(B, S, a, h // a).transpose(1, 2) for t in (q, k, v)]
        ctx = causal_attention(q, k, v).transpose(1, 2).reshape(B, S, h)
        x = x + ctx @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        y = F.layer_norm(x, (h,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], EPS)
        y = F.gelu(y @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + y @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (h,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], EPS)
    return x @ w["transformer.wte.weight"].t()


def rotate_half(x):
    d = x.shape[-1]
    return torch.cat((-x[..., d // 2:], x[..., : d // 2]), dim=-1)


def rms_norm(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight


def llama_forward(w, c, idx):
    B, S = idx.shape
    h, a, kv, L = c["hidden"], c["heads"], c["kv_heads"], c["layers"]
    d = h // a
    inv = THETA ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    ang = torch.arange(S, dtype=torch.float32)[:, None] * inv[None, :]
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    x = w["model.embed_tokens.weight"][idx]
    for l in range(L):
        p = f"model.layers.{l}."
        y = rms_norm(x, w[p + "input_layernorm.weight"])
        q = (y @ w[p + "self_attn.q_proj.weight"].t()).view(B, S, a, d).transpose(1, 2)
        k = (y @ w[p + "self_attn.k_proj.weight"].t()).view(B, S, kv, d).transpose(1, 2)
        v = (y @ w[p + "self_attn.v_proj.weight"].t()).view(B, S, kv, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(a // kv, dim=1)
        v = v.repeat_interleave(a // kv, dim=1)
        ctx = causal_attention(q, k, v).transpose(1, 2).reshape(B, S, h)
        x = x + ctx @ w[p + "self_attn.o_proj.weight"].t()
        y = rms_norm(x, w[p + "post_attention_layernorm.weight"])
        g = y @ w[p + "mlp.gate_proj.weight"].t()
        u = y @ w[p + "mlp.up_proj.weight"].t()
        x = x + (F.silu(g) * u) @ w[p + "mlp.down_proj.weight"].t()
    x = rms_norm(x, w["model.norm.weight"])
    return x @ w["lm_head.weight"].t()


def make_weights(c, gen):
    h, f, V, S, L = c["hidden"], c["ffn"], c["vocab"], c["seq"], c["layers"]
    w = {}

    def rnd(*shape, std=0.2):
        return torch.randn(*shape, generator=gen) * std

    def near_one(n):
        return 1.0 + rnd(n, std=0.1)

    if c["architecture"] == "gpt2":
        w["transformer.wte.weight"] = rnd(V, h)
        w["transformer.wpe.weight"] = rnd(S, h)
        for l in range(L):
            p = f"transformer.h.{l}."
            w[p + "ln_1.weight"], w[p + "ln_1.bias"] = near_one(h), rnd(h, std=0.1)
            w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"] = rnd(h, 3 * h), rnd(3 * h, std=0.1)
            w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"] = rnd(h, h), rnd(h, std=0.1)
            w[p + "ln_2.weight"], w[p + "ln_2.bias"] = near_one(h), rnd(h, std=0.1)
            w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"] = rnd(h, f), rnd(f, std=0.1)
            w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"] = rnd(f, h), rnd(h, std=0.1)
        w["transformer.ln_f.weight"], w["transformer.ln_f.bias"] = near_one(h), rnd(h, std=0.1)
    else:
        a, kv = c["heads"], c["kv_heads"]
        d = h // a
        w["model.embed_tokens.weight"] = rnd(V, h)
        for l in range(L):
            p = f"model.layers.{l}."
            w[p + "input_layernorm.weight"] = near_one(h)
            w[p + "self_attn.q_proj.weight"] = rnd(a * d, h)
            w[p + "self_attn.k_proj.weight"] = rnd(kv * d, h)
            w[p + "self_attn.v_proj.weight"] = rnd(kv * d, h)
            w[p + "self_attn.o_proj.weight"] = rnd(h, a * d)
            w[p + "post_attention_layernorm.weight"] = near_one(h)
            w[p + "mlp.gate_proj.weight"] = rnd(f, h)
            w[p + "mlp.up_proj.weight"] = rnd(f, h)
            w[p + "mlp.down_proj.weight"] = rnd(h, f)
        w["model.norm.weight"] = near_one(h)
        w["lm_head.weight"] = rnd(V, h)
    return w


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    for i, c in enumerate(CONFIGS):
        gen = torch.Generator().manual_seed(1234 + i)
        w = make_weights(c, gen)
        for t in w.values():
            t.requires_grad_(True)
        B, S, V = c["batch"], c["seq"], c["vocab"]
        idx = torch.randint(0, V, (B, S + 1), generator=gen)
        tokens, targets = idx[:, :-1], idx[:, 1:]
        fwd = gpt2_forward if c["architecture"] == "gpt2" else llama_forward
        logits = fwd(w, c, tokens)
        loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
        loss.backward()
        write_safetensors(os.path.join(out, c["name"] + ".weights.safetensors"), w)
        write_safetensors(os.path.join(out, c["name"] + ".grads.safetensors"), {k: t.grad for k, t in w.items()})
        meta = dict(c, positions=S, dropout=0.0, norm_eps=EPS, rope_theta=THETA, loss=loss.item(),
                    tokens=tokens.reshape(-1).tolist(), targets=targets.reshape(-1).tolist())
        with open(os.path.join(out, c["name"] + ".json"), "w") as f:
            json.dump(meta, f)
        print(f"{c['name']}: loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
