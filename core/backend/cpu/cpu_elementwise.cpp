// Element-wise ops: embedding, dropout masks and their application, residual adds, GELU (tanh),
// SwiGLU, RoPE (Hugging Face rotate_half), casts and add_into. Every output element is computed
// by one thread from its own inputs, so the thread split never changes a bit.
#include <algorithm>
#include <cmath>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"
#include "core/util/attn_temperature.h"
#include "core/util/gelu.h"

namespace remat {

using cpu::FV;

namespace {

constexpr std::int64_t kGrain = 1 << 14;  // elements per part of a parallel loop

struct EmbeddingBwdWs {
  std::int32_t *first = nullptr, *next = nullptr;  // per token id, per row
  float* acc = nullptr;                            // per thread, H floats
  EmbeddingBwdWs(cpu::Arena& a, std::int64_t rows, int H, int V, int threads) {
    first = a.take<std::int32_t>(V);
    next = a.take<std::int32_t>(rows);
    acc = a.take<float>(static_cast<std::int64_t>(threads) * H);
  }
};

struct RopeWs {
  float *cos = nullptr, *sin = nullptr;  // [S, d/2]
  RopeWs(cpu::Arena& a, int S, int d) {
    cos = a.take<float>(static_cast<std::int64_t>(S) * (d / 2));
    sin = a.take<float>(static_cast<std::int64_t>(S) * (d / 2));
  }
};

void check_p(float p, const char* op) {
  if (!(p >= 0.0f && p < 1.0f))
    throw Error(std::string("cpu ") + op + ": dropout p must be in [0, 1), got " +
                std::to_string(p));
}

void check_n(std::int64_t n, const char* op) {
  if (n < 0) throw Error(std::string("cpu ") + op + ": negative element count");
}

// The keep-mask factor of element i: 0 or 1/(1-p); 1 without a mask.
struct MaskScale {
  const std::uint8_t* m = nullptr;
  float s = 1.0f;
  float operator()(std::int64_t i) const { return m ? (m[i] ? s : 0.0f) : s; }
};

MaskScale mask_scale(const Tensor* mask, float p, std::int64_t n, const char* op) {
  check_p(p, op);
  MaskScale ms;
  if (mask && *mask) {
    cpu::check_dtype(*mask, DType::U8, op, "mask", n);
    ms.m = mask->as<const std::uint8_t>();
    ms.s = cpu::dropout_scale(p);
  } else if (p > 0.0f) {
    throw Error(std::string("cpu ") + op + ": p > 0 needs a mask");
  }
  return ms;
}

}  // namespace

std::uint64_t CpuBackend::ws_embedding_bwd(int B, int S, int H, int V) const {
  cpu::Arena a;
  EmbeddingBwdWs w(a, static_cast<std::int64_t>(B) * S, H, V, threads_);
  return a.used();
}

std::uint64_t CpuBackend::ws_rope(const AttnDims& a) const {
  cpu::Arena ar;
  RopeWs w(ar, a.S, a.d);
  return ar.used();
}

void CpuBackend::add_into(const Tensor& dst, const Tensor& src) {
  cpu::check_float(dst, "add_into", "dst", src.numel);
  cpu::check_float(src, "add_into", "src", dst.numel);
  cpu::copy_floats(*pool_, FV(src), FV(dst), dst.numel, true, kGrain);
}

void CpuBackend::cast(const Tensor& dst, const Tensor& src) {
  cpu::check_float(dst, "cast", "dst", src.numel);
  cpu::check_float(src, "cast", "src", dst.numel);
  cpu::copy_floats(*pool_, FV(src), FV(dst), dst.numel, false, kGrain);
}

// --- embedding ---

void CpuBackend::embedding_fwd(const Tensor& tokens, const Tensor& wte, const Tensor* wpe,
                               const Tensor& out, int B, int S, int H, float scale) {
  const char* op = "embedding_fwd";
  const std::int64_t rows = static_cast<std::int64_t>(B) * S;
  if (B <= 0 || S <= 0 || H <= 0) throw Error("cpu embedding_fwd: bad shape");
  cpu::check_dtype(tokens, DType::I32, op, "tokens", rows);
  cpu::check_float(wte, op, "wte", H);
  const bool has_pe = wpe && *wpe;
  if (has_pe) cpu::check_float(*wpe, op, "wpe", static_cast<std::int64_t>(S) * H);
  cpu::check_float(out, op, "out", rows * H);
  const std::int64_t V = wte.numel / H;
  const std::int32_t* tok = tokens.as<const std::int32_t>();
  for (std::int64_t r = 0; r < rows; ++r)
    if (tok[r] < 0 || tok[r] >= V)
      throw Error("cpu embedding_fwd: token " + std::to_string(tok[r]) + " at " +
                  std::to_string(r) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
  FV te(wte), pe = has_pe ? FV(*wpe) : FV(), o(out);
  cpu::parallel_for(*pool_, rows, std::max<std::int64_t>(1, kGrain / H),
                    [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t t = static_cast<std::int64_t>(tok[r]) * H, s = (r % S) * H;
      for (int c = 0; c < H; ++c) {
        const float e = te[t + c] * scale;
        o.set(r * H + c, has_pe ? e + pe[s + c] : e);
      }
    }
  });
}

void CpuBackend::embedding_bwd(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                               const Tensor* dwpe, int B, int S, int H, float scale) {
  const char* op = "embedding_bwd";
  const std::int64_t rows = static_cast<std::int64_t>(B) * S;
  if (B <= 0 || S <= 0 || H <= 0) throw Error("cpu embedding_bwd: bad shape");
  cpu::check_dtype(tokens, DType::I32, op, "tokens", rows);
  cpu::check_float(dout, op, "dout", rows * H);
  cpu::check_float(dwte, op, "dwte", H);
  const bool has_pe = dwpe && *dwpe;
  if (has_pe) cpu::check_float(*dwpe, op, "dwpe", static_cast<std::int64_t>(S) * H);
  const std::int64_t V = dwte.numel / H;
  const std::int32_t* tok = tokens.as<const std::int32_t>();
  for (std::int64_t r = 0; r < rows; ++r)
    if (tok[r] < 0 || tok[r] >= V)
      throw Error("cpu embedding_bwd: token " + std::to_string(tok[r]) + " at " +
                  std::to_string(r) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
  cpu::Arena arena(ws_, op);
  EmbeddingBwdWs ws(arena, rows, H, static_cast<int>(V), threads_);
  // Chain the rows of each token id in order; the row that starts a chain sums it and adds the
  // total (times scale) to the table once, so each row of dwte is rounded once.
  std::fill(ws.first, ws.first + V, -1);
  for (std::int64_t r = rows - 1; r >= 0; --r) {
    ws.next[r] = ws.first[tok[r]];
    ws.first[tok[r]] = static_cast<std::int32_t>(r);
  }
  FV d(dout), te(dwte);
  cpu::parallel_for(*pool_, rows, 16, [&](std::int64_t r0, std::int64_t r1, int lane) {
    float* acc = ws.acc + static_cast<std::int64_t>(lane) * H;
    for (std::int64_t r = r0; r < r1; ++r) {
      if (ws.first[tok[r]] != r) continue;
      std::fill(acc, acc + H, 0.0f);
      for (std::int64_t q = r; q >= 0; q = ws.next[q])
        for (int c = 0; c < H; ++c) acc[c] += d[q * H + c];
      const std::int64_t t = static_cast<std::int64_t>(tok[r]) * H;
      for (int c = 0; c < H; ++c) te.set(t + c, te[t + c] + acc[c] * scale);
    }
  });
  if (!has_pe) return;
  FV pe(*dwpe);
  cpu::parallel_for(*pool_, S, 4, [&](std::int64_t s0, std::int64_t s1, int) {
    for (std::int64_t s = s0; s < s1; ++s)
      for (int c = 0; c < H; ++c) {
        float acc = 0.0f;
        for (int b = 0; b < B; ++b) acc += d[(b * S + s) * H + c];
        pe.set(s * H + c, pe[s * H + c] + acc);
      }
  });
}

// --- dropout ---

void CpuBackend::dropout_mask(const Tensor& mask, const DropoutKey& key, float p,
                              std::int64_t n) {
  const char* op = "dropout_mask";
  check_p(p, op);
  check_n(n, op);
  cpu::check_dtype(mask, DType::U8, op, "mask", n);
  const std::uint32_t thr = dropout_threshold(p);
  std::uint8_t* m = mask.as<std::uint8_t>();
  // Parts start at multiples of 4 so each Philox call serves one part.
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, (n + 3) / 4, kGrain / 4, [&](std::int64_t g0, std::int64_t g1, int) {
    const std::int64_t e = std::min(n, g1 * 4);
    if (k) return cpu::dropout_keep(*k, key, static_cast<std::uint64_t>(g0 * 4), e - g0 * 4, thr,
                                    m + g0 * 4);
    std::uint32_t bits[256];
    for (std::int64_t i = g0 * 4; i < e; i += 256) {
      const std::int64_t cnt = std::min<std::int64_t>(256, e - i);
      cpu::philox_fill(key, static_cast<std::uint64_t>(i), cnt, bits);
      for (std::int64_t k = 0; k < cnt; ++k) m[i + k] = bits[k] >= thr ? 1 : 0;
    }
  });
}

void CpuBackend::dropout_fwd(const Tensor& x, const Tensor& mask, const Tensor& y, float p,
                             std::int64_t n) {
  const char* op = "dropout_fwd";
  check_n(n, op);
  cpu::check_float(x, op, "x", n);
  cpu::check_float(y, op, "y", n);
  MaskScale ms = mask_scale(&mask, p, n, op);
  FV xv(x), yv(y);
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, n, kGrain, [&](std::int64_t b, std::int64_t e, int) {
    if (k) return k->scale_mask(xv.ref(), ms.m, ms.s, yv.ref(), b, e, false);
    for (std::int64_t i = b; i < e; ++i) yv.set(i, xv[i] * ms(i));
  });
}

void CpuBackend::dropout_bwd(const Tensor& dy, const Tensor& mask, const Tensor& dx, float p,
                             std::int64_t n, bool acc) {
  const char* op = "dropout_bwd";
  check_n(n, op);
  cpu::check_float(dy, op, "dy", n);
  cpu::check_float(dx, op, "dx", n);
  MaskScale ms = mask_scale(&mask, p, n, op);
  FV g(dy), dxv(dx);
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, n, kGrain, [&](std::int64_t b, std::int64_t e, int) {
    if (k) return k->scale_mask(g.ref(), ms.m, ms.s, dxv.ref(), b, e, acc);
    for (std::int64_t i = b; i < e; ++i) dxv.put(i, g[i] * ms(i), acc);
  });
}

void CpuBackend::residual_fwd(const Tensor& res, const Tensor& x, const Tensor* mask,
                              const Tensor& out, float p, std::int64_t n, float mult) {
  const char* op = "residual_fwd";
  check_n(n, op);
  cpu::check_float(res, op, "res", n);
  cpu::check_float(x, op, "x", n);
  cpu::check_float(out, op, "out", n);
  MaskScale ms = mask_scale(mask, p, n, op);
  ms.s *= mult;
  FV rv(res), xv(x), ov(out);
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, n, kGrain, [&](std::int64_t b, std::int64_t e, int) {
    if (k) return k->residual_fwd(rv.ref(), xv.ref(), ms.m, ms.s, ov.ref(), b, e);
    for (std::int64_t i = b; i < e; ++i) ov.set(i, rv[i] + xv[i] * ms(i));
  });
}

void CpuBackend::residual_bwd(const Tensor& dout, const Tensor* mask, const Tensor& dres,
                              const Tensor& dx, float p, std::int64_t n, bool acc_res,
                              bool acc_x, float mult) {
  const char* op = "residual_bwd";
  check_n(n, op);
  cpu::check_float(dout, op, "dout", n);
  cpu::check_float(dres, op, "dres", n);
  cpu::check_float(dx, op, "dx", n);
  MaskScale ms = mask_scale(mask, p, n, op);
  ms.s *= mult;
  FV g(dout), drv(dres), dxv(dx);
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, n, kGrain, [&](std::int64_t b, std::int64_t e, int) {
    if (k) return k->residual_bwd(g.ref(), ms.m, ms.s, drv.ref(), dxv.ref(), b, e, acc_res, acc_x);
    for (std::int64_t i = b; i < e; ++i) {
      const float v = g[i];  // read before either write: dres or dx may alias dout
      dxv.put(i, v * ms(i), acc_x);
      drv.put(i, v, acc_res);
    }
  });
}

// --- activations ---

void CpuBackend::gelu_fwd(const Tensor& x, const Tensor& y, std::int64_t n) {
  const char* op = "gelu_fwd";
  check_n(n, op);
  cpu::check_float(x, op, "x", n);
  cpu::check_float(y, op, "y", n);
  FV xv(x), yv(y);
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, n, kGrain, [&](std::int64_t b, std::int64_t e, int) {
    if (k) return k->gelu(cpu::simd::Act::kGeluTanh, xv.ref(), {}, yv.ref(), b, e, false);
    cpu::for_gelu_tanh(xv, b, e, [&](std::int64_t i, float v, float t) { yv.set(i, gelu_tanh_of(v, t)); });
  });
}

void CpuBackend::gelu_bwd(const Tensor& x, const Tensor& dy, const Tensor& dx, std::int64_t n,
                          bool acc) {
  const char* op = "gelu_bwd";
  check_n(n, op);
  cpu::check_float(x, op, "x", n);
  cpu::check_float(dy, op, "dy", n);
  cpu::check_float(dx, op, "dx", n);
  FV xv(x), g(dy), dxv(dx);
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, n, kGrain, [&](std::int64_t b, std::int64_t e, int) {
    if (k) return k->gelu(cpu::simd::Act::kGeluTanh, xv.ref(), g.ref(), dxv.ref(), b, e, acc);
    cpu::for_gelu_tanh(xv, b, e, [&](std::int64_t i, float v, float t) {
      dxv.put(i, g[i] * gelu_tanh_grad_of(v, t), acc);
    });
  });
}

void CpuBackend::swiglu_fwd(const Tensor& gu, const Tensor& y, std::int64_t rows, int F) {
  const char* op = "swiglu_fwd";
  if (rows < 0 || F <= 0) throw Error("cpu swiglu_fwd: bad shape");
  cpu::check_float(gu, op, "gu", rows * 2 * F);
  cpu::check_float(y, op, "y", rows * F);
  FV in(gu), yv(y);
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, rows, std::max<std::int64_t>(1, kGrain / F),
                    [&](std::int64_t r0, std::int64_t r1, int) {
    if (k) return k->glu(cpu::simd::Act::kSilu, in.ref(), {}, yv.ref(), r0, r1, F, false);
    for (std::int64_t r = r0; r < r1; ++r)
      for (int c = 0; c < F; ++c) {
        const float g = in[r * 2 * F + c], u = in[r * 2 * F + F + c];
        const float sig = 1.0f / (1.0f + std::exp(-g));
        yv.set(r * F + c, g * sig * u);
      }
  });
}

void CpuBackend::swiglu_bwd(const Tensor& gu, const Tensor& dy, const Tensor& dgu,
                            std::int64_t rows, int F, bool acc) {
  const char* op = "swiglu_bwd";
  if (rows < 0 || F <= 0) throw Error("cpu swiglu_bwd: bad shape");
  cpu::check_float(gu, op, "gu", rows * 2 * F);
  cpu::check_float(dy, op, "dy", rows * F);
  cpu::check_float(dgu, op, "dgu", rows * 2 * F);
  FV in(gu), g(dy), out(dgu);
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, rows, std::max<std::int64_t>(1, kGrain / F),
                    [&](std::int64_t r0, std::int64_t r1, int) {
    if (k) return k->glu(cpu::simd::Act::kSilu, in.ref(), g.ref(), out.ref(), r0, r1, F, acc);
    for (std::int64_t r = r0; r < r1; ++r)
      for (int c = 0; c < F; ++c) {
        const std::int64_t ig = r * 2 * F + c, iu = ig + F;
        const float gate = in[ig], up = in[iu], d = g[r * F + c];
        const float sig = 1.0f / (1.0f + std::exp(-gate));
        const float silu = gate * sig;
        const float dgate = d * up * sig * (1.0f + gate * (1.0f - sig));
        out.put(ig, dgate, acc);
        out.put(iu, d * silu, acc);
      }
  });
}

// --- RoPE: rotate pairs (i, i + d/2) (interleaved: (2i, 2i + 1)) of every q and k head by angle
// s * theta^(-2i/d) ---

namespace {

void rope_table(cpu::ThreadPool& pool, const RopeWs& t, int S, const RopeTable& r) {
  const int half = r.rotary_dim / 2;
  cpu::parallel_for(pool, S, 64, [&](std::int64_t s0, std::int64_t s1, int) {
    for (std::int64_t s = s0; s < s1; ++s)
      for (int i = 0; i < half; ++i) {
        // As Hugging Face: the angle in fp32, cos and sin scaled after.
        const float ang = static_cast<float>(s) * r.inv_freq[i];
        t.cos[s * half + i] = std::cos(ang) * r.attention_scaling;
        t.sin[s * half + i] = std::sin(ang) * r.attention_scaling;
      }
  });
}

// sign = +1: forward rotation; -1: its transpose (backward). Interleaved: pairs (2i, 2i + 1),
// in scalar loops.
void rope_apply(cpu::ThreadPool& pool, const RopeWs& t, FV in, FV out, const AttnDims& a,
                int rotary_dim, float sign, bool acc, bool interleaved = false) {
  const int half = rotary_dim / 2, rotated = a.heads + a.kv_heads;
  const int stride = interleaved ? 2 : 1, partner = interleaved ? 1 : half;
  const std::int64_t width = a.qkv_width();
  const std::int64_t rows = static_cast<std::int64_t>(a.B) * a.S;
  const cpu::simd::Kernels* k = interleaved ? nullptr : cpu::simd::active();
  cpu::parallel_for(pool, rows, std::max<std::int64_t>(1, kGrain / width),
                    [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t s = r % a.S, base = r * width;
      const float* cs = t.cos + s * half;
      const float* sn = t.sin + s * half;
      for (int h = 0; h < rotated; ++h) {
        const std::int64_t col = base + static_cast<std::int64_t>(h) * a.d;
        if (k) k->rope_head(in.ref(), out.ref(), col, cs, sn, half, sign, acc);
        for (int i = 0; !k && i < half; ++i) {
          const std::int64_t c1 = col + stride * i, c2 = c1 + partner;
          const float x1 = in[c1], x2 = in[c2];
          const float c = cs[i], sv = sign * sn[i];
          out.put(c1, x1 * c - x2 * sv, acc);
          out.put(c2, x2 * c + x1 * sv, acc);
        }
        if (k) k->copy(in.ref(), out.ref(), col + rotary_dim, col + a.d, acc);
        for (int c = rotary_dim; !k && c < a.d; ++c) out.put(col + c, in[col + c], acc);
      }
      const std::int64_t v0 = base + static_cast<std::int64_t>(rotated) * a.d;  // the V heads
      if (k) k->copy(in.ref(), out.ref(), v0, base + width, acc);
      for (std::int64_t c = v0; !k && c < base + width; ++c) out.put(c, in[c], acc);
    }
  });
}

// Temperature tuning (RopeTable::temp_floor > 0): the q heads of position s times τ(s), the rest
// copied (the backward is the same map).
void temperature_apply(cpu::ThreadPool& pool, FV in, FV out, const AttnDims& a, const RopeTable& r, bool acc) {
  const std::int64_t width = a.qkv_width(), q = static_cast<std::int64_t>(a.heads) * a.d;
  const std::int64_t rows = static_cast<std::int64_t>(a.B) * a.S;
  cpu::parallel_for(pool, rows, std::max<std::int64_t>(1, kGrain / width), [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t row = r0; row < r1; ++row) {
      const float tau = attn_temperature(static_cast<int>(row % a.S), r.temp_floor, r.temp_scale);
      const std::int64_t base = row * width;
      for (std::int64_t c = 0; c < width; ++c) out.put(base + c, c < q ? in[base + c] * tau : in[base + c], acc);
    }
  });
}

void check_rope(const AttnDims& a, const RopeTable& r, const char* op) {
  cpu::check_dims(a, op);
  if (r.rotary_dim <= 0 || r.rotary_dim % 2 != 0 || r.rotary_dim > a.d || !r.inv_freq)
    throw Error(std::string("cpu ") + op + ": rotary dim " + std::to_string(r.rotary_dim) +
                " must be even, positive and at most the head dim " + std::to_string(a.d));
}

}  // namespace

// Both passes (backward: sign -1, the rotation's transpose; the temperature is its own).
void CpuBackend::rope_run(const Tensor& in, const Tensor& out, const AttnDims& a, const RopeTable& r, float sign,
                          bool acc, const char* op) {
  const std::int64_t n = static_cast<std::int64_t>(a.B) * a.S * a.qkv_width();
  if (r.temp_floor > 0) cpu::check_dims(a, op);
  else check_rope(a, r, op);
  cpu::check_float(in, op, sign > 0 ? "in" : "dout", n);
  cpu::check_float(out, op, sign > 0 ? "out" : "din", n);
  if (r.temp_floor > 0) return temperature_apply(*pool_, FV(in), FV(out), a, r, acc);
  cpu::Arena arena(ws_, op);
  RopeWs t(arena, a.S, a.d);
  rope_table(*pool_, t, a.S, r);
  rope_apply(*pool_, t, FV(in), FV(out), a, r.rotary_dim, sign, acc, r.interleaved);
}

void CpuBackend::rope_fwd(const Tensor& in, const Tensor& out, const AttnDims& a, const RopeTable& r) {
  rope_run(in, out, a, r, 1.0f, false, "rope_fwd");
}

void CpuBackend::rope_bwd(const Tensor& dout, const Tensor& din, const AttnDims& a,
                          const RopeTable& r, bool acc) {
  rope_run(dout, din, a, r, -1.0f, acc, "rope_bwd");
}

}  // namespace remat

namespace remat {

void CpuBackend::fwd_Rope(const OpArgs& a) { rope_fwd(*a.in[0], *a.out[0], a.attn, a.rope); }
void CpuBackend::bwd_Rope(const OpArgs& a) { rope_bwd(*a.dout[0], *a.din[0], a.attn, a.rope, a.acc[0]); }
void CpuBackend::fwd_AttnDropout(const OpArgs& a) { dropout_fwd(*a.in[0], *a.in[1], *a.out[0], a.p, a.M); }
void CpuBackend::bwd_AttnDropout(const OpArgs& a) {
  dropout_bwd(*a.dout[0], *a.in[1], *a.din[0], a.p, a.M, a.acc[0]);
}
void CpuBackend::fwd_Residual(const OpArgs& a) {
  residual_fwd(*a.in[0], *a.in[1], a.in[2], *a.out[0], a.p, a.M, a.branch_mult);
}
void CpuBackend::bwd_Residual(const OpArgs& a) {
  residual_bwd(*a.dout[0], a.in[2], *a.din[0], *a.din[1], a.p, a.M, a.acc[0], a.acc[1], a.branch_mult);
}
void CpuBackend::fwd_Gelu(const OpArgs& a) { gelu_fwd(*a.in[0], *a.out[0], a.M); }
void CpuBackend::bwd_Gelu(const OpArgs& a) { gelu_bwd(*a.in[0], *a.dout[0], *a.din[0], a.M, a.acc[0]); }
void CpuBackend::fwd_SwiGlu(const OpArgs& a) { swiglu_fwd(*a.in[0], *a.out[0], a.M, a.K); }
void CpuBackend::bwd_SwiGlu(const OpArgs& a) { swiglu_bwd(*a.in[0], *a.dout[0], *a.din[0], a.M, a.K, a.acc[0]); }
void CpuBackend::fwd_DropoutMask(const OpArgs& a) { dropout_mask(*a.out[0], a.key, a.p, a.M); }
void CpuBackend::bwd_DropoutMask(const OpArgs&) {}  // masks carry no gradient

}  // namespace remat
