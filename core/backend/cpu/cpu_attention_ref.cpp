// Naive causal attention, the reference loops (REMAT_SIMD=scalar; cpu_attention.cpp has the GEMM
// path the kernel sets use): full [B, heads, S, S] probabilities, then P V. Forward ops split the
// work by (batch, head); backward ops by (batch, kv head), so the gradient of a shared K or V
// head is summed over its q heads in a fixed order by one thread. A sliding window keeps the
// full S x S probabilities (entries outside the band are 0) and visits only the band. Attention
// sinks as on the GEMM path (cpu_attention_sinks.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/backend/cpu/cpu_attention.h"
#include "core/backend/cpu/cpu_attention_sinks.h"
#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"

namespace remat {

using cpu::FV;
using cpu::attn::AttnWs;
using cpu::attn::Layout;
using cpu::attn::check_attn;
using cpu::attn::ctx_n;
using cpu::attn::probs_n;
using cpu::dot;

void CpuBackend::attn_softmax_fwd_ref(const Tensor& qkv, const Tensor& probs, const AttnDims& a,
                                      const Tensor* sinks) {
  const char* op = "attn_softmax_fwd";
  check_attn(a, op, qkv, "qkv");
  cpu::check_float(probs, op, "probs", probs_n(a));
  cpu::attn::check_sinks(a, op, sinks, nullptr, false);
  const FV sv = sinks ? FV(*sinks) : FV();
  cpu::Arena arena(ws_, op);
  AttnWs ws(arena, a, threads_);
  const Layout L(a);
  FV in(qkv), out(probs);
  const float scale = a.scale, cap = a.softcap;
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, static_cast<std::int64_t>(a.B) * a.heads, 1,
                    [&](std::int64_t u0, std::int64_t u1, int lane) {
    float* K = ws.kv_of(lane);
    float* s = ws.row_of(lane);
    float* q = ws.vec_of(lane);
    for (std::int64_t u = u0; u < u1; ++u) {
      const int b = static_cast<int>(u / L.heads), h = static_cast<int>(u % L.heads);
      cpu::stage_kv_head(in, L.width, L.k_col(h / L.group), b, L.S, L.d, K);
      const float sink = sinks ? sv[h] : 0.0f;
      for (int i = 0; i < L.S; ++i) {
        const std::int64_t qr = L.row(b, i) + L.q_col(h);
        for (int c = 0; c < L.d; ++c) q[c] = in[qr + c];
        const int j0 = a.first_key(i);
        cpu::scaled_scores(q, K, j0, i - j0 + 1, L.d, scale, s + j0);
        if (cap > 0.0f) cpu::soft_cap(s + j0, i - j0 + 1, cap);
        const std::int64_t pr = L.prob_row(b, h, i);
        for (int j = 0; j < j0; ++j) out.set(pr + j, 0.0f);
        for (int j = i + 1; j < L.S; ++j) out.set(pr + j, 0.0f);
        const int n = i - j0 + 1;
        if (k) {
          float mx = k->row_max(s + j0, n);
          if (sinks) mx = std::max(mx, sink);
          float sum = k->exp_sum(s + j0, n, mx, nullptr, 0, 1.0f);
          if (sinks) sum += std::exp(sink - mx);
          k->div_store(s + j0, n, sum, out.ref(), pr + j0);
          continue;
        }
        float mx = -std::numeric_limits<float>::infinity();
        for (int j = j0; j <= i; ++j) mx = std::max(mx, s[j]);
        if (sinks) mx = std::max(mx, sink);
        float sum = 0.0f;
        for (int j = j0; j <= i; ++j) {
          s[j] = std::exp(s[j] - mx);
          sum += s[j];
        }
        if (sinks) sum += std::exp(sink - mx);
        for (int j = j0; j <= i; ++j) out.set(pr + j, s[j] / sum);
      }
    }
  });
}

void CpuBackend::attn_softmax_bwd_ref(const Tensor& qkv, const Tensor& probs, const Tensor& dprobs,
                                  const Tensor& dqkv, const AttnDims& a, const Tensor* sinks,
                                  const Tensor* dsinks) {
  const char* op = "attn_softmax_bwd";
  check_attn(a, op, qkv, "qkv");
  check_attn(a, op, dqkv, "dqkv");
  cpu::check_float(probs, op, "probs", probs_n(a));
  cpu::check_float(dprobs, op, "dprobs", probs_n(a));
  cpu::attn::check_sinks(a, op, sinks, dsinks, true);
  cpu::Arena arena(ws_, op);
  AttnWs ws(arena, a, threads_);
  const Layout L(a);
  FV in(qkv), P(probs), dP(dprobs), out(dqkv);
  const float scale = a.scale, cap = a.softcap;
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, static_cast<std::int64_t>(a.B) * a.kv_heads, 1,
                    [&](std::int64_t u0, std::int64_t u1, int lane) {
    float* K = ws.kv_of(lane);
    float* dK = ws.acc_of(lane);
    float* q = ws.vec_of(lane);
    float* dq = q + L.d;
    float* t = ws.row_of(lane);  // soft-capped: tanh(raw / cap) of the row's band
    for (std::int64_t u = u0; u < u1; ++u) {
      const int b = static_cast<int>(u / L.kv_heads), g = static_cast<int>(u % L.kv_heads);
      cpu::stage_kv_head(in, L.width, L.k_col(g), b, L.S, L.d, K);
      std::fill(dK, dK + static_cast<std::int64_t>(L.S) * L.d, 0.0f);
      for (int hg = 0; hg < L.group; ++hg) {
        const int h = g * L.group + hg;
        for (int i = 0; i < L.S; ++i) {
          const std::int64_t qr = L.row(b, i) + L.q_col(h), pr = L.prob_row(b, h, i);
          for (int c = 0; c < L.d; ++c) {
            q[c] = in[qr + c];
            dq[c] = 0.0f;
          }
          const int j0 = a.first_key(i);
          if (cap > 0.0f) {
            cpu::scaled_scores(q, K, j0, i - j0 + 1, L.d, scale, t + j0);
            cpu::tanh_of_quotient(t + j0, i - j0 + 1, cap);
          }
          float rs = 0.0f;
          if (k) rs = k->dot_refs(P.ref(), dP.ref(), pr + j0, i - j0 + 1);
          else
            for (int j = j0; j <= i; ++j) rs += P[pr + j] * dP[pr + j];
          for (int j = j0; j <= i; ++j) {
            const float* kj = K + static_cast<std::int64_t>(j) * L.d;
            float ds = P[pr + j] * (dP[pr + j] - rs);
            if (cap > 0.0f) ds *= 1.0f - t[j] * t[j];
            float* dkj = dK + static_cast<std::int64_t>(j) * L.d;
            const float dss = ds * scale;
            for (int c = 0; c < L.d; ++c) {
              dq[c] += ds * kj[c];
              dkj[c] += dss * q[c];
            }
          }
          for (int c = 0; c < L.d; ++c) out.set(qr + c, out[qr + c] + dq[c] * scale);
        }
      }
      for (int j = 0; j < L.S; ++j) {
        const std::int64_t kr = L.row(b, j) + L.k_col(g);
        for (int c = 0; c < L.d; ++c)
          out.set(kr + c, out[kr + c] + dK[static_cast<std::int64_t>(j) * L.d + c]);
      }
    }
  });
  if (sinks) cpu::attn::naive_sink_grad(*pool_, ws, a, in, P, dP, FV(*sinks), FV(*dsinks));
}

void CpuBackend::attn_pv_fwd_ref(const Tensor& p, const Tensor& qkv, const Tensor& ctx,
                             const AttnDims& a) {
  const char* op = "attn_pv_fwd";
  check_attn(a, op, qkv, "qkv");
  cpu::check_float(p, op, "p", probs_n(a));
  cpu::check_float(ctx, op, "ctx", ctx_n(a));
  cpu::Arena arena(ws_, op);
  AttnWs ws(arena, a, threads_);
  const Layout L(a);
  FV in(qkv), P(p), out(ctx);
  cpu::parallel_for(*pool_, static_cast<std::int64_t>(a.B) * a.heads, 1,
                    [&](std::int64_t u0, std::int64_t u1, int lane) {
    float* V = ws.kv_of(lane);
    float* o = ws.vec_of(lane);
    for (std::int64_t u = u0; u < u1; ++u) {
      const int b = static_cast<int>(u / L.heads), h = static_cast<int>(u % L.heads);
      cpu::stage_kv_head(in, L.width, L.v_col(h / L.group), b, L.S, L.dv, V);
      for (int i = 0; i < L.S; ++i) {
        const std::int64_t pr = L.prob_row(b, h, i);
        std::fill(o, o + L.dv, 0.0f);
        // Causal (and banded): P is zero outside the band, which is not read.
        for (int j = a.first_key(i); j <= i; ++j) {
          const float pij = P[pr + j];
          const float* vj = V + static_cast<std::int64_t>(j) * L.dv;
          for (int c = 0; c < L.dv; ++c) o[c] += pij * vj[c];
        }
        const std::int64_t cr = L.ctx(b, i, h);
        for (int c = 0; c < L.dv; ++c) out.set(cr + c, o[c]);
      }
    }
  });
}

void CpuBackend::attn_pv_bwd_ref(const Tensor& p, const Tensor& qkv, const Tensor& dctx,
                             const Tensor& dp, const Tensor& dqkv, const AttnDims& a,
                             bool acc_dp) {
  const char* op = "attn_pv_bwd";
  check_attn(a, op, qkv, "qkv");
  check_attn(a, op, dqkv, "dqkv");
  cpu::check_float(p, op, "p", probs_n(a));
  cpu::check_float(dp, op, "dp", probs_n(a));
  cpu::check_float(dctx, op, "dctx", ctx_n(a));
  cpu::Arena arena(ws_, op);
  AttnWs ws(arena, a, threads_);
  const Layout L(a);
  FV in(qkv), P(p), dO(dctx), dPv(dp), out(dqkv);
  cpu::parallel_for(*pool_, static_cast<std::int64_t>(a.B) * a.kv_heads, 1,
                    [&](std::int64_t u0, std::int64_t u1, int lane) {
    float* V = ws.kv_of(lane);
    float* dV = ws.acc_of(lane);
    float* go = ws.vec_of(lane);
    for (std::int64_t u = u0; u < u1; ++u) {
      const int b = static_cast<int>(u / L.kv_heads), g = static_cast<int>(u % L.kv_heads);
      cpu::stage_kv_head(in, L.width, L.v_col(g), b, L.S, L.dv, V);
      std::fill(dV, dV + static_cast<std::int64_t>(L.S) * L.dv, 0.0f);
      for (int t = 0; t < L.group; ++t) {
        const int h = g * L.group + t;
        for (int i = 0; i < L.S; ++i) {
          const std::int64_t cr = L.ctx(b, i, h), pr = L.prob_row(b, h, i);
          for (int c = 0; c < L.dv; ++c) go[c] = dO[cr + c];
          const int j0 = a.first_key(i);
          if (!acc_dp)
            for (int j = 0; j < j0; ++j) dPv.set(pr + j, 0.0f);
          for (int j = j0; j <= i; ++j) {
            const float* vj = V + static_cast<std::int64_t>(j) * L.dv;
            dPv.put(pr + j, dot(go, vj, L.dv), acc_dp);
            const float pij = P[pr + j];
            float* dvj = dV + static_cast<std::int64_t>(j) * L.dv;
            for (int c = 0; c < L.dv; ++c) dvj[c] += pij * go[c];
          }
          if (!acc_dp)
            for (int j = i + 1; j < L.S; ++j) dPv.set(pr + j, 0.0f);
        }
      }
      for (int j = 0; j < L.S; ++j) {
        const std::int64_t vr = L.row(b, j) + L.v_col(g);
        for (int c = 0; c < L.dv; ++c)
          out.set(vr + c, out[vr + c] + dV[static_cast<std::int64_t>(j) * L.dv + c]);
      }
    }
  });
}

}  // namespace remat
