"""The mixtures of experts of the float64 family reference (families.py): Mixtral's, Qwen3-MoE's
and Qwen2-MoE's routers and SwiGLU experts under their tensor names, and the dispatch of a
sparse layer's MLP to DeepSeek's routers (deepseek.py), gpt-oss's (gpt_oss.py) and Llama 4's
(llama4.py). Shares nothing with the engine.
"""
import torch
import torch.nn.functional as F

import deepseek
import gpt_oss
import llama4


def linear(x, weight, bias=None):
    y = x @ weight.t()
    return y if bias is None else y + bias


def tensor_shapes(f, p):
    """A sparse layer's router and experts under the family's names."""
    if f["names"] == "gpt_oss":
        return gpt_oss.moe_shapes(f, p)
    e, h = f["moe"], f["hidden"]
    m = p + ("block_sparse_moe." if f["names"] == "mixtral" else "mlp.")
    names = ("w1", "w3", "w2") if f["names"] == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    s = {m + "gate.weight": (e["experts"], h)}
    for x in range(e["experts"]):
        ex = m + "experts.%d." % x
        s[ex + names[0] + ".weight"], s[ex + names[1] + ".weight"] = (e["ffn"], h), (e["ffn"], h)
        s[ex + names[2] + ".weight"] = (h, e["ffn"])
    if e.get("shared"):
        sh = m + "shared_expert."
        s[sh + "gate_proj.weight"], s[sh + "up_proj.weight"] = (e["shared"], h), (e["shared"], h)
        s[sh + "down_proj.weight"] = (h, e["shared"])
        s[m + "shared_expert_gate.weight"] = (1, h)
    return s


def layer(w, f, p, P):
    """A sparse layer's router and experts (gate, up, down) from `w`."""
    m = p + ("block_sparse_moe." if f["names"] == "mixtral" else "mlp.")
    names = ("w1", "w3", "w2") if f["names"] == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    P["router"] = w[m + "gate.weight"]
    P["experts"] = [tuple(w[m + "experts.%d.%s.weight" % (x, n)] for n in names) for x in range(f["moe"]["experts"])]
    if f["moe"].get("shared"):
        P["shared"] = tuple(w[m + "shared_expert.%s.weight" % n] for n in ("gate_proj", "up_proj", "down_proj"))
        P["shared_gate"] = w[m + "shared_expert_gate.weight"]


def forward(f, P, y):
    """Dropless routing: softmax of the router's logits, the top-k (renormalised with norm), and
    the weighted sum of those experts' SwiGLU MLPs (each expert computed on every token and
    weighted by 0 where not chosen: the same sum, and the same gradients), plus the shared
    expert times its sigmoid gate where the family has one."""
    e = f["moe"]
    if e.get("scoring"):  # DeepSeek's routers
        return deepseek.moe(f, P, y)
    if e.get("kind") == "gpt_oss":  # gpt-oss's router and clamped SwiGLU experts
        return gpt_oss.moe(f, P, y)
    if e.get("kind") == "llama4":  # sigmoid scores on the experts' inputs, a shared expert
        return llama4.moe(f, P, y)
    logits = linear(y, P["router"])
    if "router_logits" in P:  # collected for the load-balancing loss (families.loss_of)
        P["router_logits"].append(logits.reshape(-1, e["experts"]))
    probs = logits.softmax(-1)
    top, idx = probs.topk(e["top_k"], dim=-1)
    if "route_counts" in P:  # the choices per expert (families.forward's route_counts)
        P["route_counts"].append(torch.bincount(idx.reshape(-1), minlength=e["experts"]).tolist())
    if e["norm"]:
        top = top / top.sum(-1, keepdim=True)
    out = torch.zeros_like(y)
    for x, (g, u, d) in enumerate(P["experts"]):
        weight = (top * (idx == x)).sum(-1, keepdim=True)
        out = out + weight * linear(F.silu(linear(y, g)) * linear(y, u), d)
    if "shared" in P:  # the shared expert, gated by sigmoid(y · g)
        g, u, d = P["shared"]
        out = out + torch.sigmoid(linear(y, P["shared_gate"])) * linear(F.silu(linear(y, g)) * linear(y, u), d)
    return out
