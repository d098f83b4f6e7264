"""RoPE of the float64 family reference (families.py): the inverse frequencies and attention
factor of a Hugging Face `rope_scaling` object (modeling_rope_utils' formulas), the cos/sin tables
of a model's features, and the rotate-half rotation."""
import math

import torch


# RoPE: inverse frequencies and attention factor (Hugging Face modeling_rope_utils formulas).

def rope_parameters(rope_scaling, theta, rotary_dim, max_position_embeddings, seq_len,
                    original_max_position_embeddings=None):
    """(inv_freq float64 [rotary_dim / 2], attention_factor) for a `rope_scaling` object (None
    or Hugging Face's dict, `rope_type` or legacy `type`). `seq_len` is the longest sequence
    the step sees (dynamic and longrope depend on it); `original_max_position_embeddings` is
    Phi-3's top-level field, used by longrope when rope_scaling does not have it."""
    dim = rotary_dim
    exps = torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float64) / dim

    def default(base):
        return 1.0 / (base ** exps)

    rs = rope_scaling or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "default":
        return default(theta), 1.0
    if kind == "linear":
        return default(theta) / rs["factor"], 1.0
    if kind == "dynamic":
        factor = rs["factor"]
        n = seq_len if seq_len > max_position_embeddings else max_position_embeddings
        base = theta * ((factor * n / max_position_embeddings) - (factor - 1)) ** (dim / (dim - 2))
        return default(base), 1.0
    if kind == "llama3":
        inv = default(theta)
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / lo, old / hi
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        return torch.where(medium, smoothed, scaled), 1.0
    if kind == "yarn":
        factor = rs["factor"]
        original = rs.get("original_max_position_embeddings") or max_position_embeddings
        if rs.get("original_max_position_embeddings"):
            # Newer Hugging Face releases take the factor from the two lengths; configs whose
            # factor is that ratio read the same under every release.
            factor = max_position_embeddings / original

        def mscale(scale, m=1.0):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        attention = rs.get("attention_factor")
        if attention is None:
            if rs.get("mscale") and rs.get("mscale_all_dim"):
                attention = mscale(factor, rs["mscale"]) / mscale(factor, rs["mscale_all_dim"])
            else:
                attention = mscale(factor)
        beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

        def correction_dim(rotations):
            return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

        low, high = correction_dim(beta_fast), correction_dim(beta_slow)
        if rs.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        extrapolation = 1 - ramp  # share of the unscaled frequency
        inv = default(theta)
        return inv / factor * (1 - extrapolation) + inv * extrapolation, attention
    if kind == "longrope":
        original = original_max_position_embeddings or rs.get("original_max_position_embeddings")
        factor = rs.get("factor")
        if original:
            factor = max_position_embeddings / original
        else:
            original = max_position_embeddings
        attention = rs.get("attention_factor")
        if attention is None:
            attention = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
        ext = torch.tensor(rs["long_factor"] if seq_len > original else rs["short_factor"], dtype=torch.float64)
        return 1.0 / (ext * theta ** exps), attention
    raise ValueError("unknown rope_type %r" % kind)


def rope_tables(f, S, dtype):
    rd = int(f["head_dim"] * f["partial_rotary_factor"])
    inv, attention = rope_parameters(f["rope_scaling"], f["rope_theta"], rd, f["positions"], S,
                                     f["original_max_position_embeddings"])
    ang = torch.arange(S, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat((ang, ang), dim=-1)
    return (emb.cos() * attention).to(dtype), (emb.sin() * attention).to(dtype), rd


def rotate_half(x):
    d = x.shape[-1]
    return torch.cat((-x[..., d // 2:], x[..., : d // 2]), dim=-1)


def apply_rope(x, cos, sin, rd):
    rot, keep = x[..., :rd], x[..., rd:]
    return torch.cat((rot * cos + rotate_half(rot) * sin, keep), dim=-1)
