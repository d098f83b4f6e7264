"""The pieces every forward written out by hand (*_by_hand.py) uses, float64: Hugging Face's
RMSNorm (weight w, or 1 + w for Gemma), LayerNorm, rotate_half RoPE tables and rotation, the
causal mask, grouped-query repetition, the weights as float64 and the comparison with the generic
reference. Shares nothing with the engine.
"""
import torch

DT = torch.float64


def rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rms1(x, w, eps):
    """Gemma's RMSNorm: the weight applied as (1 + w)."""
    return rms(x, 1.0 + w, eps)


def ln(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def cos_sin(base, rd, S, factor=1.0):
    """cos, sin [S, rd] of the default RoPE on base (inverse frequencies divided by a linear factor)."""
    inv = 1.0 / (base ** (torch.arange(0, rd, 2, dtype=DT) / rd)) / factor
    emb = torch.arange(S, dtype=DT)[:, None] * inv
    emb = torch.cat((emb, emb), -1)
    return emb.cos(), emb.sin()


def rotate(x, cos, sin):
    return x * cos + rotate_half(x) * sin


def causal(S):
    return torch.full((S, S), float("-inf"), dtype=DT).triu(1)


def repeat_kv(t, heads):
    """[B, kv, S, d] -> [B, heads, S, d], each kv head for heads / kv query heads in a row."""
    return t.repeat_interleave(heads // t.shape[1], dim=1)


def as64(w):
    return {n: t.to(DT) for n, t in w.items()}


def matches(by_hand_loss, generic_loss, f, w, win):
    """True when the hand-written loss equals the generic reference's (features f) to 1e-12."""
    return abs(by_hand_loss - generic_loss(as64(w), f, win).item()) < 1e-12
