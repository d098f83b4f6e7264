#!/usr/bin/python3
"""PyTorch reference RoPE frequencies for RematLab's rope_scaling tests.

For each case: a Hugging Face `rope_scaling` object, rope_theta, the rotary dimension,
max_position_embeddings and a sequence length, and the inverse frequencies and attention
scaling computed with torch ops the way Hugging Face's modeling_rope_utils does (float32
tensors, Python-float scalars; dynamic NTK past max positions as the forward pass does it,
with the sequence length a 0-d int64 tensor). Written from the published formulas (RoPE,
position interpolation, NTK-aware dynamic scaling, Llama 3.1's wavelength bands, YaRN,
LongRoPE). Writes OUT_DIR/rope_frequencies.json.

Each case has the frequencies twice: `inv_freq` as torch computes them, and
`inv_freq_exact_pow`, the same torch steps with the float32 pow correctly rounded (done in
float64, then rounded) instead of torch's vectorised float32 pow, which is accurate to 1 ulp
but not correctly rounded.

Usage: /usr/bin/python3 rope_reference.py OUT_DIR
"""
import json
import math
import os
import sys

import torch

EXACT_POW = False


def pow32(base, e):
    """base ** e for a float32 tensor e, base a Python float or float32 0-d tensor."""
    if not EXACT_POW:
        return base ** e
    return (torch.as_tensor(base, dtype=torch.float32).double() ** e.double()).float()


def exponents(dim):
    return torch.arange(0, dim, 2, dtype=torch.int64).float() / dim


def default_freqs(theta, dim):
    return 1.0 / pow32(theta, exponents(dim))


def linear_freqs(rs, theta, dim):
    inv = default_freqs(theta, dim)
    inv /= rs["factor"]
    return inv, 1.0


def dynamic_freqs(rs, theta, dim, max_pos, seq_len):
    if seq_len <= max_pos:
        return default_freqs(theta, dim), 1.0
    s = torch.maximum(torch.tensor(seq_len), torch.tensor(max_pos))
    factor = rs["factor"]
    base = theta * ((factor * s / max_pos) - (factor - 1)) ** (dim / (dim - 2))
    return 1.0 / pow32(base, exponents(dim)), 1.0


def llama3_freqs(rs, theta, dim):
    inv = default_freqs(theta, dim)
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled), 1.0


def yarn_mscale(scale, m=1.0):
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def yarn_freqs(rs, theta, dim, max_pos):
    factor = rs["factor"]
    original = rs.get("original_max_position_embeddings") or max_pos
    att = rs.get("attention_factor")
    if att is None:
        m, m_all = rs.get("mscale"), rs.get("mscale_all_dim")
        att = yarn_mscale(factor, m) / yarn_mscale(factor, m_all) if m and m_all else yarn_mscale(factor)
    fast, slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

    def correction_dim(rotations):
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(theta))

    lo, hi = correction_dim(fast), correction_dim(slow)
    if rs.get("truncate", True):
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, dim - 1)
    if lo == hi:
        hi += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - lo) / (hi - lo), 0, 1)
    pos = pow32(theta, exponents(dim))
    extrapolation, interpolation = 1.0 / pos, 1.0 / (factor * pos)
    extra_share = 1 - ramp
    return interpolation * (1 - extra_share) + extrapolation * extra_share, att


def longrope_freqs(rs, theta, dim, max_pos, seq_len):
    original = rs.get("original_max_position_embeddings") or max_pos
    factor = rs.get("factor")
    if factor is None:
        factor = max_pos / original
    att = rs.get("attention_factor")
    if att is None:
        att = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    ext = rs["long_factor"] if seq_len > original else rs["short_factor"]
    ext = torch.tensor(ext, dtype=torch.float32)
    return 1.0 / (ext * pow32(theta, exponents(dim))), att


def frequencies(rs, theta, dim, max_pos, seq_len):
    t = "default" if rs is None else rs.get("rope_type", rs.get("type"))
    if t == "default":
        return default_freqs(theta, dim), 1.0
    if t == "linear":
        return linear_freqs(rs, theta, dim)
    if t == "dynamic":
        return dynamic_freqs(rs, theta, dim, max_pos, seq_len)
    if t == "llama3":
        return llama3_freqs(rs, theta, dim)
    if t == "yarn":
        return yarn_freqs(rs, theta, dim, max_pos)
    if t in ("longrope", "su"):
        return longrope_freqs(rs, theta, dim, max_pos, seq_len)
    raise ValueError(t)


def factor_list(n, gen, lo, hi):
    return [round(lo + (hi - lo) * x, 6) for x in torch.rand(n, generator=gen).tolist()]


def cases():
    out = []

    def add(name, rs, theta, dim, max_pos, seq_len):
        out.append(dict(name=name, rope_scaling=rs, theta=theta, rotary_dim=dim,
                        max_position_embeddings=max_pos, seq_len=seq_len))

    for dim in (8, 64, 80, 96, 128):
        for theta in (10000.0, 500000.0, 1000000.0):
            add(f"default_d{dim}_t{int(theta)}", None, theta, dim, 2048, 512)
    for dim, factor in ((64, 2.0), (128, 4.0), (96, 8.3)):
        add(f"linear_d{dim}_f{factor}", {"type": "linear", "factor": factor}, 10000.0, dim, 2048, 512)
    for dim, factor, max_pos, seq in ((64, 2.0, 2048, 1024), (64, 2.0, 2048, 4096), (128, 4.0, 4096, 5000),
                                      (96, 1.5, 3000, 7777), (16, 8.0, 1024, 65536),
                                      # the scaled base rounds differently in float32 than in float64
                                      (128, 8.0, 3000, 3001), (128, 3.7, 3000, 5000), (128, 4.0, 3000, 100000)):
        add(f"dynamic_d{dim}_f{factor}_s{seq}", {"rope_type": "dynamic", "factor": factor},
            10000.0, dim, max_pos, seq)
    llama31 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192, "rope_type": "llama3"}
    add("llama3_1_8b", llama31, 500000.0, 128, 131072, 4096)
    add("llama3_2_1b", dict(llama31, factor=32.0), 500000.0, 64, 131072, 4096)
    for dim, theta, factor, low, high, old in ((128, 10000.0, 8.0, 1.0, 4.0, 4096), (128, 1000000.0, 16.0, 1.0, 4.0, 8192),
                                               (96, 500000.0, 32.0, 2.0, 8.0, 8192), (128, 500000.0, 8.0, 1.0, 2.0, 2048)):
        add(f"llama3_d{dim}_t{int(theta)}_f{factor}_{low}_{high}_{old}",
            {"rope_type": "llama3", "factor": factor, "low_freq_factor": low, "high_freq_factor": high,
             "original_max_position_embeddings": old}, theta, dim, 131072, 1024)
    add("llama3_small", {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 2.0,
                         "high_freq_factor": 8.0, "original_max_position_embeddings": 2048},
        10000.0, 32, 8192, 256)
    add("yarn_qwen25", {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
        1000000.0, 128, 32768, 1024)
    add("yarn_deepseek_v3", {"type": "yarn", "factor": 40, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0,
                             "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096},
        10000.0, 64, 163840, 2048)
    add("yarn_mscale_ratio", {"rope_type": "yarn", "factor": 16.0, "mscale": 0.707, "mscale_all_dim": 1.0},
        10000.0, 64, 4096, 2048)
    add("yarn_gpt_oss", {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                         "truncate": False, "original_max_position_embeddings": 4096},
        150000.0, 64, 131072, 4096)
    add("yarn_attention_factor", {"rope_type": "yarn", "factor": 2.0, "attention_factor": 0.9,
                                  "beta_fast": 8.0, "beta_slow": 2.0}, 10000.0, 96, 2048, 512)
    add("yarn_no_max_pos", {"rope_type": "yarn", "factor": 8.0}, 10000.0, 32, 1024, 512)
    gen = torch.Generator().manual_seed(4321)
    phi3 = {"type": "longrope", "short_factor": factor_list(48, gen, 1.0, 1.2),
            "long_factor": factor_list(48, gen, 1.0, 60.0), "original_max_position_embeddings": 4096}
    add("longrope_phi3_short", phi3, 10000.0, 96, 131072, 4096)
    add("longrope_phi3_long", phi3, 10000.0, 96, 131072, 4097)
    su = {"type": "su", "short_factor": factor_list(32, gen, 1.0, 1.1),
          "long_factor": factor_list(32, gen, 1.0, 20.0), "factor": 8.0, "attention_factor": 1.05}
    add("longrope_su_long", su, 10000.0, 64, 2048, 4096)
    add("longrope_implicit_factor", dict(phi3, type="longrope"), 250000.0, 96, 65536, 100)
    return out


def main():
    global EXACT_POW
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    result = []
    for c in cases():
        args = (c["rope_scaling"], c["theta"], c["rotary_dim"], c["max_position_embeddings"], c["seq_len"])
        EXACT_POW = False
        inv, att = frequencies(*args)
        EXACT_POW = True
        exact, _ = frequencies(*args)
        assert inv.dtype == torch.float32 and exact.dtype == torch.float32, c["name"]
        result.append(dict(c, inv_freq=inv.tolist(), inv_freq_exact_pow=exact.tolist(), attention_scaling=float(att)))
    with open(os.path.join(out, "rope_frequencies.json"), "w") as f:
        json.dump({"cases": result}, f)
    print(f"rope_frequencies.json: {len(result)} cases")


if __name__ == "__main__":
    main()
