// Flash attention on the CPU, the reference loops (REMAT_SIMD=scalar; cpu_flash.cpp has the GEMM
// path the kernel sets use): causal online softmax over key tiles of a fixed width, keeping
// only ctx and the log-sum-exp (fp32, natural log). Backward recomputes probabilities from lse.
// Dropout uses the naive path's mask bits: index ((b * heads + h) * S + i) * S + j. A sliding
// window starts each query's tiles at its first key, so only the band is visited; soft-capped
// scores are recomputed, capped, in backward.
//
// Forward work is split by (batch, head); backward by (batch, kv head), so one thread sums the
// gradient of a shared K/V head over its q heads in a fixed order. Attention sinks as on the
// GEMM path: the running max starts at the sink, the running sum at 1 (cpu_attention_sinks.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/backend/cpu/cpu_attention_sinks.h"
#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"
#include "core/backend/cpu/cpu_flash.h"

namespace remat {

using cpu::FV;

using cpu::dot;
using cpu::flash::FlashLayout;
using cpu::flash::FlashWs;
using cpu::flash::check_flash;

namespace {
constexpr int kT = cpu::kFlashTile;
}  // namespace

void CpuBackend::flash_fwd_ref(const Tensor& qkv, const Tensor& ctx, const Tensor& lse,
                           const AttnDims& a, const DropoutKey& key, float p,
                           const Tensor* sinks) {
  const char* op = "flash_fwd";
  check_flash(a, op, qkv, ctx, lse, p);
  cpu::attn::check_sinks(a, op, sinks, nullptr, false);
  const FV sv = sinks ? FV(*sinks) : FV();
  cpu::Arena arena(ws_, op);
  FlashWs ws(arena, a, threads_);
  const FlashLayout L(a);
  FV in(qkv), out(ctx);
  float* lse_out = lse.as<float>();
  const float scale = a.scale, cap = a.softcap, keep_scale = cpu::dropout_scale(p);
  const std::uint32_t thr = dropout_threshold(p);
  const bool drop = p > 0.0f;
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, static_cast<std::int64_t>(a.B) * a.heads, 1,
                    [&](std::int64_t u0, std::int64_t u1, int lane) {
    float* K = ws.k + lane * ws.sd;
    float* V = ws.v + lane * ws.sd;
    float* q = ws.vec + static_cast<std::int64_t>(lane) * 4 * ws.d;
    float* o = q + ws.d;
    float* s = ws.s + static_cast<std::int64_t>(lane) * kT;
    std::uint32_t* bits = ws.bits + static_cast<std::int64_t>(lane) * kT;
    for (std::int64_t u = u0; u < u1; ++u) {
      const int b = static_cast<int>(u / L.heads), h = static_cast<int>(u % L.heads);
      const int g = h / L.group;
      cpu::stage_kv_head(in, L.width, L.k_col(g), b, L.S, L.d, K);
      cpu::stage_kv_head(in, L.width, L.v_col(g), b, L.S, L.dv, V);
      for (int i = 0; i < L.S; ++i) {
        const std::int64_t qr = L.row(b, i) + static_cast<std::int64_t>(h) * L.d;
        for (int c = 0; c < L.d; ++c) q[c] = in[qr + c];
        std::fill(o, o + L.dv, 0.0f);
        float m = sinks ? sv[h] : -std::numeric_limits<float>::infinity();
        float l = sinks ? 1.0f : 0.0f;
        const std::uint64_t prow = static_cast<std::uint64_t>(L.lse(b, h, i)) * L.S;
        for (int k0 = a.first_key(i); k0 <= i; k0 += kT) {
          const int n = std::min(kT, i - k0 + 1);
          cpu::scaled_scores(q, K, k0, n, L.d, scale, s);
          if (cap > 0.0f) cpu::soft_cap(s, n, cap);
          float tmx = -std::numeric_limits<float>::infinity();
          if (k) tmx = k->row_max(s, n);
          else
            for (int c = 0; c < n; ++c) tmx = std::max(tmx, s[c]);
          const float mnew = std::max(m, tmx);
          const float alpha = std::exp(m - mnew);
          if (drop) cpu::philox_fill(key, prow + k0, n, bits);
          float ts = 0.0f;
          if (k) ts = k->exp_sum(s, n, mnew, drop ? bits : nullptr, thr, keep_scale);
          for (int c = 0; !k && c < n; ++c) {
            const float e = std::exp(s[c] - mnew);
            ts += e;
            s[c] = drop ? (bits[c] >= thr ? e * keep_scale : 0.0f) : e;
          }
          l = l * alpha + ts;
          for (int c = 0; c < L.dv; ++c) o[c] *= alpha;
          for (int j = 0; j < n; ++j) {
            const float w = s[j];
            const float* vj = V + static_cast<std::int64_t>(k0 + j) * L.dv;
            for (int c = 0; c < L.dv; ++c) o[c] += w * vj[c];
          }
          m = mnew;
        }
        const std::int64_t cr = L.ctx(b, i, h);
        for (int c = 0; c < L.dv; ++c) out.set(cr + c, o[c] / l);
        lse_out[L.lse(b, h, i)] = m + std::log(l);
      }
    }
  });
}

void CpuBackend::flash_bwd_ref(const Tensor& qkv, const Tensor& ctx, const Tensor& lse,
                           const Tensor& dctx, const Tensor& dqkv, const AttnDims& a,
                           const DropoutKey& key, float p, const Tensor* sinks,
                           const Tensor* dsinks) {
  const char* op = "flash_bwd";
  check_flash(a, op, qkv, ctx, lse, p);
  cpu::check_float(dctx, op, "dctx", ctx.numel);
  cpu::check_float(dqkv, op, "dqkv", qkv.numel);
  cpu::attn::check_sinks(a, op, sinks, dsinks, true);
  cpu::Arena arena(ws_, op);
  FlashWs ws(arena, a, threads_);
  const FlashLayout L(a);
  FV in(qkv), O(ctx), dO(dctx), out(dqkv);
  const float* lse_in = lse.as<const float>();
  const float scale = a.scale, cap = a.softcap, keep_scale = cpu::dropout_scale(p);
  const std::uint32_t thr = dropout_threshold(p);
  const bool drop = p > 0.0f;
  cpu::parallel_for(*pool_, static_cast<std::int64_t>(a.B) * a.kv_heads, 1,
                    [&](std::int64_t u0, std::int64_t u1, int lane) {
    float* K = ws.k + lane * ws.sd;
    float* V = ws.v + lane * ws.sd;
    float* dK = ws.dk + lane * ws.sd;
    float* dV = ws.dv + lane * ws.sd;
    float* q = ws.vec + static_cast<std::int64_t>(lane) * 4 * ws.d;
    float* go = q + ws.d;
    float* dq = go + ws.d;
    std::uint32_t* bits = ws.bits + static_cast<std::int64_t>(lane) * kT;
    float* t = ws.s + static_cast<std::int64_t>(lane) * kT;  // soft-capped: tanh(raw / cap) of a tile
    for (std::int64_t u = u0; u < u1; ++u) {
      const int b = static_cast<int>(u / L.kv_heads), g = static_cast<int>(u % L.kv_heads);
      cpu::stage_kv_head(in, L.width, L.k_col(g), b, L.S, L.d, K);
      cpu::stage_kv_head(in, L.width, L.v_col(g), b, L.S, L.dv, V);
      std::fill(dK, dK + ws.sd, 0.0f);
      std::fill(dV, dV + ws.sd, 0.0f);
      for (int hg = 0; hg < L.group; ++hg) {
        const int h = g * L.group + hg;
        for (int i = 0; i < L.S; ++i) {
          const std::int64_t qr = L.row(b, i) + static_cast<std::int64_t>(h) * L.d;
          const std::int64_t cr = L.ctx(b, i, h);
          float D = 0.0f;  // rowsum(P * dP) = dO . O, also under dropout
          for (int c = 0; c < L.d; ++c) {
            q[c] = in[qr + c];
            dq[c] = 0.0f;
          }
          for (int c = 0; c < L.dv; ++c) {
            go[c] = dO[cr + c];
            D += go[c] * O[cr + c];
          }
          const float lse_i = lse_in[L.lse(b, h, i)];
          const std::uint64_t prow = static_cast<std::uint64_t>(L.lse(b, h, i)) * L.S;
          for (int k0 = a.first_key(i); k0 <= i; k0 += kT) {
            const int n = std::min(kT, i - k0 + 1);
            if (drop) cpu::philox_fill(key, prow + k0, n, bits);
            if (cap > 0.0f) {
              cpu::scaled_scores(q, K, k0, n, L.d, scale, t);
              cpu::tanh_of_quotient(t, n, cap);
            }
            for (int c = 0; c < n; ++c) {
              const std::int64_t j = k0 + c;
              const float* kj = K + j * L.d;
              const float* vj = V + j * L.dv;
              const float score = cap > 0.0f ? t[c] * cap : dot(q, kj, L.d) * scale;
              const float pij = std::exp(score - lse_i);
              const float z = drop ? (bits[c] >= thr ? keep_scale : 0.0f) : 1.0f;
              const float pz = pij * z;
              float ds = pij * (dot(go, vj, L.dv) * z - D);
              if (cap > 0.0f) ds *= 1.0f - t[c] * t[c];
              const float dss = ds * scale;
              float* dkj = dK + j * L.d;
              float* dvj = dV + j * L.dv;
              for (int e = 0; e < L.dv; ++e) dvj[e] += pz * go[e];
              for (int e = 0; e < L.d; ++e) {
                dq[e] += ds * kj[e];
                dkj[e] += dss * q[e];
              }
            }
          }
          for (int c = 0; c < L.d; ++c) out.set(qr + c, out[qr + c] + dq[c] * scale);
        }
      }
      for (int j = 0; j < L.S; ++j) {
        const std::int64_t kr = L.row(b, j) + L.k_col(g), vr = L.row(b, j) + L.v_col(g);
        for (int c = 0; c < L.d; ++c) out.set(kr + c, out[kr + c] + dK[static_cast<std::int64_t>(j) * L.d + c]);
        for (int c = 0; c < L.dv; ++c) out.set(vr + c, out[vr + c] + dV[static_cast<std::int64_t>(j) * L.dv + c]);
      }
    }
  });
  if (sinks) cpu::attn::flash_sink_grad(*pool_, a, O, dO, lse_in, FV(*sinks), FV(*dsinks));
}

}  // namespace remat
