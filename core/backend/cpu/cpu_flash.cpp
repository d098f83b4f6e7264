// Flash attention on GEMMs: for each (batch, head), blocks of kT queries against tiles of kT
// keys, each tile's scores Q K^T and its P V single-threaded sgemms on the lane's staged fp32
// copies of the head (cpu_gemm_parts.h), the online softmax in between on the SIMD kernels; only
// ctx and the log-sum-exp (fp32, natural log) are kept. Backward recomputes each tile's
// probabilities from lse and runs dP = dO V^T, dV += P^T dO, dQ += dS K, dK += dS^T Q on GEMMs.
// A block's tiles start at its first row's first key and end at its last row, so the shapes and
// the bits depend on S, d and the window only. Dropout uses the naive path's mask bits: index
// ((b * heads + h) * S + i) * S + j. Forward work is split by (batch, head); backward by
// (batch, kv head), one lane summing the gradient of a shared K/V head over its q heads in order.
// With no kernel set active (REMAT_SIMD=scalar) the reference loops of cpu_flash_ref.cpp run.
// Attention sinks: each row's running max starts at its head's sink and its running sum at 1
// (exp(0)), so lse includes the sink and the backward's P = exp(score - lse) is unchanged in
// form; the sinks' gradient is a pass of its own (cpu_attention_sinks.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/backend/cpu/cpu_attention_sinks.h"
#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"
#include "core/backend/cpu/cpu_flash.h"
#include "core/backend/cpu/cpu_gemm_parts.h"

namespace remat {

using cpu::FV;
using cpu::flash::FlashLayout;
using cpu::flash::FlashWs;
using cpu::flash::check_flash;
using cpu::flash::kT;

namespace {

// f(i0, i1, t0, t1): each tile of keys [t0, t1) of each block of queries [i0, i1).
template <class F>
void for_tiles(const AttnDims& a, F&& f) {
  for (int i0 = 0; i0 < a.S; i0 += kT) {
    const int i1 = std::min(a.S, i0 + kT);
    for (int t0 = a.first_key(i0); t0 < i1; t0 += kT) f(i0, i1, t0, std::min(i1, t0 + kT));
  }
}

// The keys of tile [t0, t1) that query i attends to: [lo, hi], empty when lo > hi.
struct Band {
  int lo, hi;
  Band(const AttnDims& a, int i, int t0, int t1)
      : lo(std::max(t0, a.first_key(i))), hi(std::min(t1 - 1, i)) {}
  int n() const { return hi - lo + 1; }
};

// Row r of a tile [., kT] keeps [lo - t0, hi - t0] and is 0 elsewhere in [0, nt). (A chunk's
// row may start past the tile: lo - t0 > nt, even > kT.)
void zero_outside(float* row, const Band& bd, int t0, int nt) {
  const int a = std::min(nt, std::max(0, bd.lo - t0)), b = std::min(nt, std::max(a, bd.hi - t0 + 1));
  std::fill(row, row + a, 0.0f);
  std::fill(row + b, row + nt, 0.0f);
}

}  // namespace

std::uint64_t CpuBackend::ws_flash(const AttnDims& a) const {
  cpu::Arena ar;
  FlashWs w(ar, a, threads_);
  return ar.used();
}

void CpuBackend::flash_fwd(const Tensor& qkv, const Tensor& ctx, const Tensor& lse,
                           const AttnDims& a, const DropoutKey& key, float p,
                           const Tensor* sinks) {
  const cpu::simd::Kernels* k = cpu::simd::active();
  if (!k) return flash_fwd_ref(qkv, ctx, lse, a, key, p, sinks);
  const char* op = "flash_fwd";
  check_flash(a, op, qkv, ctx, lse, p);
  cpu::attn::check_sinks(a, op, sinks, nullptr, false);
  const FV sv = sinks ? FV(*sinks) : FV();
  cpu::ensure_blas_threads(1);
  cpu::Arena arena(ws_, op);
  FlashWs ws(arena, a, threads_);
  const FlashLayout L(a);
  FV in(qkv), out(ctx);
  float* lse_out = lse.as<float>();
  const float scale = a.scale, cap = a.softcap, keep_scale = cpu::dropout_scale(p);
  const std::uint32_t thr = dropout_threshold(p);
  const bool drop = p > 0.0f;
  const int S = L.S, d = L.d, dv = L.dv;
  cpu::parallel_for(*pool_, static_cast<std::int64_t>(a.B) * a.heads, 1,
                    [&](std::int64_t u0, std::int64_t u1, int lane) {
    float* Q = ws.q + lane * ws.sd;
    float* K = ws.k + lane * ws.sd;
    float* V = ws.v + lane * ws.sd;
    float* O = ws.o + lane * ws.sd;
    float* st = ws.t1 + static_cast<std::int64_t>(lane) * kT * kT;
    float* m = ws.rows + static_cast<std::int64_t>(lane) * 3 * S;
    float* l = m + S;
    std::uint32_t* bits = ws.bits + static_cast<std::int64_t>(lane) * kT;
    for (std::int64_t u = u0; u < u1; ++u) {
      const int b = static_cast<int>(u / L.heads), h = static_cast<int>(u % L.heads);
      const int g = h / L.group;
      cpu::stage_kv_head(in, L.width, L.q_col(h), b, S, d, Q);
      cpu::stage_kv_head(in, L.width, L.k_col(g), b, S, d, K);
      cpu::stage_kv_head(in, L.width, L.v_col(g), b, S, dv, V);
      std::fill(O, O + ws.sd, 0.0f);
      std::fill(m, m + S, sinks ? sv[h] : -std::numeric_limits<float>::infinity());
      std::fill(l, l + S, sinks ? 1.0f : 0.0f);
      for_tiles(a, [&](int i0, int i1, int t0, int t1) {
        const int nb = i1 - i0, nt = t1 - t0;
        cpu::sgemm1(false, true, nb, nt, d, Q + static_cast<std::int64_t>(i0) * d, d,
                    K + static_cast<std::int64_t>(t0) * d, d, 0.0f, st, kT);
        for (int r = 0; r < nb; ++r) {
          const int i = i0 + r;
          float* row = st + static_cast<std::int64_t>(r) * kT;
          const Band bd(a, i, t0, t1);
          if (bd.n() > 0) {
            const int n = bd.n();
            float* x = row + (bd.lo - t0);
            for (int c = 0; c < n; ++c) x[c] *= scale;
            if (cap > 0.0f) cpu::soft_cap(x, n, cap);
            const float mnew = std::max(m[i], k->row_max(x, n));
            const float alpha = std::exp(m[i] - mnew);
            if (drop)
              cpu::philox_fill(key, static_cast<std::uint64_t>(L.lse(b, h, i)) * S + bd.lo, n, bits);
            const float ts = k->exp_sum(x, n, mnew, drop ? bits : nullptr, thr, keep_scale);
            l[i] = l[i] * alpha + ts;
            float* o = O + static_cast<std::int64_t>(i) * dv;
            for (int c = 0; c < dv; ++c) o[c] *= alpha;
            m[i] = mnew;
          }
          zero_outside(row, bd, t0, nt);
        }
        cpu::sgemm1(false, false, nb, dv, nt, st, kT, V + static_cast<std::int64_t>(t0) * dv, dv,
                    1.0f, O + static_cast<std::int64_t>(i0) * dv, dv);
      });
      for (int i = 0; i < S; ++i) {
        float* o = O + static_cast<std::int64_t>(i) * dv;
        for (int c = 0; c < dv; ++c) o[c] /= l[i];
        cpu::narrow(o, out, L.ctx(b, i, h), dv, false);
        lse_out[L.lse(b, h, i)] = m[i] + std::log(l[i]);
      }
    }
  });
}

void CpuBackend::flash_bwd(const Tensor& qkv, const Tensor& ctx, const Tensor& lse,
                           const Tensor& dctx, const Tensor& dqkv, const AttnDims& a,
                           const DropoutKey& key, float p, const Tensor* sinks,
                           const Tensor* dsinks) {
  const cpu::simd::Kernels* k = cpu::simd::active();
  if (!k) return flash_bwd_ref(qkv, ctx, lse, dctx, dqkv, a, key, p, sinks, dsinks);
  const char* op = "flash_bwd";
  check_flash(a, op, qkv, ctx, lse, p);
  cpu::check_float(dctx, op, "dctx", ctx.numel);
  cpu::check_float(dqkv, op, "dqkv", qkv.numel);
  cpu::attn::check_sinks(a, op, sinks, dsinks, true);
  cpu::ensure_blas_threads(1);
  cpu::Arena arena(ws_, op);
  FlashWs ws(arena, a, threads_);
  const FlashLayout L(a);
  FV in(qkv), O(ctx), dO(dctx), out(dqkv);
  const float* lse_in = lse.as<const float>();
  const float scale = a.scale, cap = a.softcap, keep_scale = cpu::dropout_scale(p);
  const std::uint32_t thr = dropout_threshold(p);
  const bool drop = p > 0.0f;
  const int S = L.S, d = L.d, dv = L.dv;
  cpu::parallel_for(*pool_, static_cast<std::int64_t>(a.B) * a.kv_heads, 1,
                    [&](std::int64_t u0, std::int64_t u1, int lane) {
    float* Q = ws.q + lane * ws.sd;
    float* G = ws.go + lane * ws.sd;
    float* dQ = ws.o + lane * ws.sd;
    float* K = ws.k + lane * ws.sd;
    float* V = ws.v + lane * ws.sd;
    float* dK = ws.dk + lane * ws.sd;
    float* dV = ws.dv + lane * ws.sd;
    float* pt = ws.t1 + static_cast<std::int64_t>(lane) * kT * kT;  // scores, then P * z
    float* dt = ws.t2 + static_cast<std::int64_t>(lane) * kT * kT;  // dP, then dS * scale
    float* D = ws.rows + static_cast<std::int64_t>(lane) * 3 * S;   // rowsum(P * dP) = dO . O
    float* tc = ws.s + static_cast<std::int64_t>(lane) * kT;        // capped: tanh(raw / cap)
    std::uint32_t* bits = ws.bits + static_cast<std::int64_t>(lane) * kT;
    for (std::int64_t u = u0; u < u1; ++u) {
      const int b = static_cast<int>(u / L.kv_heads), g = static_cast<int>(u % L.kv_heads);
      cpu::stage_kv_head(in, L.width, L.k_col(g), b, S, d, K);
      cpu::stage_kv_head(in, L.width, L.v_col(g), b, S, dv, V);
      std::fill(dK, dK + ws.sd, 0.0f);
      std::fill(dV, dV + ws.sd, 0.0f);
      for (int hg = 0; hg < L.group; ++hg) {
        const int h = g * L.group + hg;
        cpu::stage_kv_head(in, L.width, L.q_col(h), b, S, d, Q);
        cpu::stage_kv_head(dO, L.ctx_width, L.ctx_col(h), b, S, dv, G);
        for (int i = 0; i < S; ++i) D[i] = k->dot_refs(dO.ref(), O.ref(), L.ctx(b, i, h), dv);
        std::fill(dQ, dQ + ws.sd, 0.0f);
        for_tiles(a, [&](int i0, int i1, int t0, int t1) {
          const int nb = i1 - i0, nt = t1 - t0;
          const float* Qb = Q + static_cast<std::int64_t>(i0) * d;
          const float* Gb = G + static_cast<std::int64_t>(i0) * dv;
          cpu::sgemm1(false, true, nb, nt, d, Qb, d, K + static_cast<std::int64_t>(t0) * d, d,
                      0.0f, pt, kT);
          cpu::sgemm1(false, true, nb, nt, dv, Gb, dv, V + static_cast<std::int64_t>(t0) * dv, dv,
                      0.0f, dt, kT);
          for (int r = 0; r < nb; ++r) {
            const int i = i0 + r;
            float* prow = pt + static_cast<std::int64_t>(r) * kT;
            float* drow = dt + static_cast<std::int64_t>(r) * kT;
            const Band bd(a, i, t0, t1);
            if (bd.n() > 0) {
              const int n = bd.n();
              float* x = prow + (bd.lo - t0);
              float* y = drow + (bd.lo - t0);
              for (int c = 0; c < n; ++c) x[c] *= scale;
              if (cap > 0.0f) {
                std::copy(x, x + n, tc);
                cpu::tanh_of_quotient(tc, n, cap);
                for (int c = 0; c < n; ++c) x[c] = tc[c] * cap;
              }
              k->exp_sum(x, n, lse_in[L.lse(b, h, i)], nullptr, 0, 1.0f);  // x = P
              if (drop)
                cpu::philox_fill(key, static_cast<std::uint64_t>(L.lse(b, h, i)) * S + bd.lo, n,
                                 bits);
              for (int c = 0; c < n; ++c) {
                const float z = drop ? (bits[c] >= thr ? keep_scale : 0.0f) : 1.0f;
                float ds = x[c] * (y[c] * z - D[i]);
                if (cap > 0.0f) ds *= 1.0f - tc[c] * tc[c];
                y[c] = ds * scale;
                x[c] *= z;
              }
            }
            zero_outside(prow, bd, t0, nt);
            zero_outside(drow, bd, t0, nt);
          }
          cpu::sgemm1(true, false, nt, dv, nb, pt, kT, Gb, dv, 1.0f,
                      dV + static_cast<std::int64_t>(t0) * dv, dv);
          cpu::sgemm1(false, false, nb, d, nt, dt, kT, K + static_cast<std::int64_t>(t0) * d, d,
                      1.0f, dQ + static_cast<std::int64_t>(i0) * d, d);
          cpu::sgemm1(true, false, nt, d, nb, dt, kT, Qb, d, 1.0f,
                      dK + static_cast<std::int64_t>(t0) * d, d);
        });
        cpu::add_head(dQ, out, L.width, L.q_col(h), b, S, d);
      }
      cpu::add_head(dK, out, L.width, L.k_col(g), b, S, d);
      cpu::add_head(dV, out, L.width, L.v_col(g), b, S, dv);
    }
  });
  if (sinks) cpu::attn::flash_sink_grad(*pool_, a, O, dO, lse_in, FV(*sinks), FV(*dsinks));
}

}  // namespace remat

namespace remat {

void CpuBackend::fwd_FlashAttn(const OpArgs& a) {
  flash_fwd(*a.in[0], *a.out[0], *a.out[1], a.attn, a.key, a.p, a.w);
}
void CpuBackend::bwd_FlashAttn(const OpArgs& a) {
  flash_bwd(*a.in[0], *a.out[0], *a.out[1], *a.dout[0], *a.din[0], a.attn, a.key, a.p, a.w, a.dw);
}

}  // namespace remat
