// Naive causal attention on GEMMs: for each (batch, head) the scores Q K^T, then P V, and in the
// backward dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q, each a single-threaded sgemm on the
// lane's staged fp32 copies of the head's rows (cpu_gemm_parts.h); the row softmax and its
// gradient in between run on the SIMD kernels. The rows are cut into fixed blocks of kAttnBlock
// queries and each block's GEMMs cover only the keys its band reaches (causal: up to its last
// row), so the shapes, and the bits, depend on S, d and the window only: not on the thread
// count, the batch, or how many heads a tensor-parallel rank holds. Forward ops split the work
// by (batch, head); backward ops by (batch, kv head), the gradient of a shared K or V head
// summed over its q heads in order by one lane. With no kernel set active (REMAT_SIMD=scalar)
// the reference loops of cpu_attention_ref.cpp run instead. Attention sinks: one more column
// of each row's softmax in the forward, their gradient a pass of its own (cpu_attention_sinks.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/backend/cpu/cpu_attention.h"
#include "core/backend/cpu/cpu_attention_sinks.h"
#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"
#include "core/backend/cpu/cpu_gemm_parts.h"

namespace remat {

using cpu::FV;
using cpu::attn::AttnWs;
using cpu::attn::Layout;
using cpu::attn::check_attn;
using cpu::attn::ctx_n;
using cpu::attn::probs_n;

namespace {

constexpr int kAttnBlock = 64;  // query rows per block of the attention GEMMs

// f(i0, i1, k0) for each block of query rows [i0, i1): its keys are [k0, i1).
template <class F>
void for_blocks(const AttnDims& a, F&& f) {
  for (int i0 = 0; i0 < a.S; i0 += kAttnBlock) {
    const int i1 = std::min(a.S, i0 + kAttnBlock);
    f(i0, i1, a.first_key(i0));
  }
}

// One head's probabilities as fp32 in buf [S, S]: for row i, the keys [k0, i1) its block's GEMMs
// read, the band [first_key(i), i] from the tensor and 0 elsewhere (entries outside the band are
// never read, as in the reference).
const float* probs_head(FV P, std::int64_t at, const AttnDims& a, float* buf) {
  for_blocks(a, [&](int i0, int i1, int k0) {
    for (int i = i0; i < i1; ++i) {
      float* r = buf + static_cast<std::int64_t>(i) * a.S;
      const int j0 = a.first_key(i);
      std::fill(r + k0, r + j0, 0.0f);
      cpu::widen(P, at + static_cast<std::int64_t>(i) * a.S + j0, r + j0, i - j0 + 1);
      std::fill(r + i + 1, r + i1, 0.0f);
    }
  });
  return buf;
}

// s[i, k0 .. i1) = Q[i] . K[k0 .. i1) for each block (the raw scores, unscaled).
// d: the heads' width (attn.d for q·k, the value width for dO·V).
void scores(const float* Q, const float* K, const AttnDims& a, float* s, int d) {
  const int S = a.S;
  for_blocks(a, [&](int i0, int i1, int k0) {
    cpu::sgemm1(false, true, i1 - i0, i1 - k0, d, Q + static_cast<std::int64_t>(i0) * d, d,
                K + static_cast<std::int64_t>(k0) * d, d, 0.0f,
                s + static_cast<std::int64_t>(i0) * S + k0, S);
  });
}

// Row i of s outside its band [j0, i] set to 0 (the whole row, as the probabilities store it).
void zero_outside(float* row, int j0, int i, int S) {
  std::fill(row, row + j0, 0.0f);
  std::fill(row + i + 1, row + S, 0.0f);
}

// The sinks' gradient (cpu_attention_sinks.h) with each (batch, head)'s scores on the block
// GEMMs: one lane per head, its batches and rows in order, so the sum's order is fixed.
void sink_grad(cpu::ThreadPool& pool, const AttnWs& ws, const AttnDims& a, FV in, FV P, FV dP,
               FV sinks, FV dsinks) {
  const Layout L(a);
  cpu::parallel_for(pool, a.heads, 1, [&](std::int64_t h0, std::int64_t h1, int lane) {
    float *Q = ws.q_of(lane), *K = ws.kv_of(lane), *s = ws.ss_of(lane);
    for (std::int64_t hh = h0; hh < h1; ++hh) {
      const int h = static_cast<int>(hh);
      const double sink = sinks[h];
      double acc = 0.0;
      for (int b = 0; b < a.B; ++b) {
        cpu::stage_kv_head(in, L.width, L.q_col(h), b, L.S, L.d, Q);
        cpu::stage_kv_head(in, L.width, L.k_col(h / L.group), b, L.S, L.d, K);
        scores(Q, K, a, s, a.d);
        for (int i = 0; i < L.S; ++i) {
          float* r = s + static_cast<std::int64_t>(i) * L.S;
          const int j0 = a.first_key(i), n = i - j0 + 1;
          for (int j = j0; j <= i; ++j) r[j] *= a.scale;
          if (a.softcap > 0.0f) cpu::soft_cap(r + j0, n, a.softcap);
          acc += cpu::attn::sink_row_term(r + j0, n, sink, P, dP, L.prob_row(b, h, i) + j0);
        }
      }
      dsinks.set(h, dsinks[h] - static_cast<float>(acc));
    }
  });
}

}  // namespace

std::uint64_t CpuBackend::ws_attention(const AttnDims& a) const {
  cpu::Arena ar;
  AttnWs w(ar, a, threads_);
  return ar.used();
}

void CpuBackend::attn_softmax_fwd(const Tensor& qkv, const Tensor& probs, const AttnDims& a,
                                  const Tensor* sinks) {
  const cpu::simd::Kernels* k = cpu::simd::active();
  if (!k) return attn_softmax_fwd_ref(qkv, probs, a, sinks);
  const char* op = "attn_softmax_fwd";
  check_attn(a, op, qkv, "qkv");
  cpu::check_float(probs, op, "probs", probs_n(a));
  cpu::attn::check_sinks(a, op, sinks, nullptr, false);
  const FV sv = sinks ? FV(*sinks) : FV();
  cpu::ensure_blas_threads(1);
  cpu::Arena arena(ws_, op);
  AttnWs ws(arena, a, threads_);
  const Layout L(a);
  FV in(qkv), out(probs);
  const float scale = a.scale, cap = a.softcap;
  cpu::parallel_for(*pool_, static_cast<std::int64_t>(a.B) * a.heads, 1,
                    [&](std::int64_t u0, std::int64_t u1, int lane) {
    float *Q = ws.q_of(lane), *K = ws.kv_of(lane), *s = ws.ss_of(lane);
    for (std::int64_t u = u0; u < u1; ++u) {
      const int b = static_cast<int>(u / L.heads), h = static_cast<int>(u % L.heads);
      cpu::stage_kv_head(in, L.width, L.q_col(h), b, L.S, L.d, Q);
      cpu::stage_kv_head(in, L.width, L.k_col(h / L.group), b, L.S, L.d, K);
      scores(Q, K, a, s, a.d);
      const float sink = sinks ? sv[h] : 0.0f;
      for (int i = 0; i < L.S; ++i) {
        float* r = s + static_cast<std::int64_t>(i) * L.S;
        const int j0 = a.first_key(i), n = i - j0 + 1;
        for (int j = j0; j <= i; ++j) r[j] *= scale;
        if (cap > 0.0f) cpu::soft_cap(r + j0, n, cap);
        float mx = k->row_max(r + j0, n);
        if (sinks) mx = std::max(mx, sink);
        float sum = k->exp_sum(r + j0, n, mx, nullptr, 0, 1.0f);
        if (sinks) sum += std::exp(sink - mx);
        k->div_store(r + j0, n, sum, cpu::simd::Ref{r, false}, j0);
        zero_outside(r, j0, i, L.S);
      }
      cpu::narrow(s, out, L.prob_row(b, h, 0), static_cast<std::int64_t>(L.S) * L.S, false);
    }
  });
}

void CpuBackend::attn_softmax_bwd(const Tensor& qkv, const Tensor& probs, const Tensor& dprobs,
                                  const Tensor& dqkv, const AttnDims& a, const Tensor* sinks,
                                  const Tensor* dsinks) {
  const cpu::simd::Kernels* k = cpu::simd::active();
  if (!k) return attn_softmax_bwd_ref(qkv, probs, dprobs, dqkv, a, sinks, dsinks);
  const char* op = "attn_softmax_bwd";
  check_attn(a, op, qkv, "qkv");
  check_attn(a, op, dqkv, "dqkv");
  cpu::check_float(probs, op, "probs", probs_n(a));
  cpu::check_float(dprobs, op, "dprobs", probs_n(a));
  cpu::attn::check_sinks(a, op, sinks, dsinks, true);
  cpu::ensure_blas_threads(1);
  cpu::Arena arena(ws_, op);
  AttnWs ws(arena, a, threads_);
  const Layout L(a);
  FV in(qkv), P(probs), dP(dprobs), out(dqkv);
  const float scale = a.scale, cap = a.softcap;
  const int S = L.S, d = L.d;
  cpu::parallel_for(*pool_, static_cast<std::int64_t>(a.B) * a.kv_heads, 1,
                    [&](std::int64_t u0, std::int64_t u1, int lane) {
    float *Q = ws.q_of(lane), *K = ws.kv_of(lane), *dK = ws.acc_of(lane), *dQ = ws.o_of(lane);
    float *s = ws.ss_of(lane), *pr = ws.row_of(lane), *dpr = ws.row2_of(lane);
    for (std::int64_t u = u0; u < u1; ++u) {
      const int b = static_cast<int>(u / L.kv_heads), g = static_cast<int>(u % L.kv_heads);
      cpu::stage_kv_head(in, L.width, L.k_col(g), b, S, d, K);
      std::fill(dK, dK + static_cast<std::int64_t>(S) * d, 0.0f);
      for (int hg = 0; hg < L.group; ++hg) {
        const int h = g * L.group + hg;
        cpu::stage_kv_head(in, L.width, L.q_col(h), b, S, d, Q);
        if (cap > 0.0f) scores(Q, K, a, s, a.d);  // raw scores, for the cap's 1 - t^2
        // s becomes dS * scale, row by row: P (dP - sum(P dP)), times 1 - t^2 when capped.
        for (int i = 0; i < S; ++i) {
          float* r = s + static_cast<std::int64_t>(i) * S;
          const std::int64_t at = L.prob_row(b, h, i);
          const int j0 = a.first_key(i), n = i - j0 + 1;
          const float rs = k->dot_refs(P.ref(), dP.ref(), at + j0, n);
          cpu::widen(P, at + j0, pr, n);
          cpu::widen(dP, at + j0, dpr, n);
          if (cap > 0.0f) {
            float* t = r + j0;
            for (int c = 0; c < n; ++c) t[c] *= scale;
            cpu::tanh_of_quotient(t, n, cap);
            for (int c = 0; c < n; ++c) t[c] = pr[c] * (dpr[c] - rs) * (1.0f - t[c] * t[c]) * scale;
          } else {
            for (int c = 0; c < n; ++c) r[j0 + c] = pr[c] * (dpr[c] - rs) * scale;
          }
          // Keys of the row's block outside its band take part in the block's GEMMs: 0.
          zero_outside(r, j0, i, S);
        }
        for_blocks(a, [&](int i0, int i1, int k0) {
          const float* ds = s + static_cast<std::int64_t>(i0) * S + k0;
          cpu::sgemm1(false, false, i1 - i0, d, i1 - k0, ds, S,
                      K + static_cast<std::int64_t>(k0) * d, d, 0.0f,
                      dQ + static_cast<std::int64_t>(i0) * d, d);
          cpu::sgemm1(true, false, i1 - k0, d, i1 - i0, ds, S,
                      Q + static_cast<std::int64_t>(i0) * d, d, 1.0f,
                      dK + static_cast<std::int64_t>(k0) * d, d);
        });
        cpu::add_head(dQ, out, L.width, L.q_col(h), b, S, d);
      }
      cpu::add_head(dK, out, L.width, L.k_col(g), b, S, d);
    }
  });
  if (sinks) sink_grad(*pool_, ws, a, in, P, dP, FV(*sinks), FV(*dsinks));
}

void CpuBackend::attn_pv_fwd(const Tensor& p, const Tensor& qkv, const Tensor& ctx,
                             const AttnDims& a) {
  if (!cpu::simd::active()) return attn_pv_fwd_ref(p, qkv, ctx, a);
  const char* op = "attn_pv_fwd";
  check_attn(a, op, qkv, "qkv");
  cpu::check_float(p, op, "p", probs_n(a));
  cpu::check_float(ctx, op, "ctx", ctx_n(a));
  cpu::ensure_blas_threads(1);
  cpu::Arena arena(ws_, op);
  AttnWs ws(arena, a, threads_);
  const Layout L(a);
  FV in(qkv), P(p), out(ctx);
  const int S = L.S, d = L.dv;  // the value heads' width
  cpu::parallel_for(*pool_, static_cast<std::int64_t>(a.B) * a.heads, 1,
                    [&](std::int64_t u0, std::int64_t u1, int lane) {
    float *V = ws.kv_of(lane), *O = ws.o_of(lane), *buf = ws.ss_of(lane);
    for (std::int64_t u = u0; u < u1; ++u) {
      const int b = static_cast<int>(u / L.heads), h = static_cast<int>(u % L.heads);
      cpu::stage_kv_head(in, L.width, L.v_col(h / L.group), b, S, d, V);
      const float* Ph = probs_head(P, L.prob_row(b, h, 0), a, buf);
      for_blocks(a, [&](int i0, int i1, int k0) {
        cpu::sgemm1(false, false, i1 - i0, d, i1 - k0, Ph + static_cast<std::int64_t>(i0) * S + k0,
                    S, V + static_cast<std::int64_t>(k0) * d, d, 0.0f,
                    O + static_cast<std::int64_t>(i0) * d, d);
      });
      for (int i = 0; i < S; ++i)
        cpu::narrow(O + static_cast<std::int64_t>(i) * d, out, L.ctx(b, i, h), d, false);
    }
  });
}

void CpuBackend::attn_pv_bwd(const Tensor& p, const Tensor& qkv, const Tensor& dctx,
                             const Tensor& dp, const Tensor& dqkv, const AttnDims& a,
                             bool acc_dp) {
  if (!cpu::simd::active()) return attn_pv_bwd_ref(p, qkv, dctx, dp, dqkv, a, acc_dp);
  const char* op = "attn_pv_bwd";
  check_attn(a, op, qkv, "qkv");
  check_attn(a, op, dqkv, "dqkv");
  cpu::check_float(p, op, "p", probs_n(a));
  cpu::check_float(dp, op, "dp", probs_n(a));
  cpu::check_float(dctx, op, "dctx", ctx_n(a));
  cpu::ensure_blas_threads(1);
  cpu::Arena arena(ws_, op);
  AttnWs ws(arena, a, threads_);
  const Layout L(a);
  FV in(qkv), P(p), dO(dctx), dPv(dp), out(dqkv);
  const int S = L.S, d = L.dv;  // the value heads' width
  cpu::parallel_for(*pool_, static_cast<std::int64_t>(a.B) * a.kv_heads, 1,
                    [&](std::int64_t u0, std::int64_t u1, int lane) {
    float *V = ws.kv_of(lane), *dV = ws.acc_of(lane), *G = ws.q_of(lane), *s = ws.ss_of(lane);
    for (std::int64_t u = u0; u < u1; ++u) {
      const int b = static_cast<int>(u / L.kv_heads), g = static_cast<int>(u % L.kv_heads);
      cpu::stage_kv_head(in, L.width, L.v_col(g), b, S, d, V);
      std::fill(dV, dV + static_cast<std::int64_t>(S) * d, 0.0f);
      for (int t = 0; t < L.group; ++t) {
        const int h = g * L.group + t;
        const std::int64_t at = L.prob_row(b, h, 0);
        cpu::stage_kv_head(dO, L.ctx_width, L.ctx_col(h), b, S, d, G);
        // dV += P^T dO over each block's rows.
        const float* Ph = probs_head(P, at, a, s);
        for_blocks(a, [&](int i0, int i1, int k0) {
          cpu::sgemm1(true, false, i1 - k0, d, i1 - i0,
                      Ph + static_cast<std::int64_t>(i0) * S + k0, S,
                      G + static_cast<std::int64_t>(i0) * d, d, 1.0f,
                      dV + static_cast<std::int64_t>(k0) * d, d);
        });
        // dP = dO V^T on the band; 0 outside it, or left as it is when accumulating.
        scores(G, V, a, s, d);
        for (int i = 0; i < S; ++i) {
          float* r = s + static_cast<std::int64_t>(i) * S;
          const int j0 = a.first_key(i);
          if (acc_dp) {
            cpu::narrow(r + j0, dPv, at + static_cast<std::int64_t>(i) * S + j0, i - j0 + 1, true);
          } else {
            zero_outside(r, j0, i, S);
          }
        }
        if (!acc_dp) cpu::narrow(s, dPv, at, static_cast<std::int64_t>(S) * S, false);
      }
      cpu::add_head(dV, out, L.width, L.v_col(g), b, S, d);
    }
  });
}

}  // namespace remat

namespace remat {

void CpuBackend::fwd_AttnSoftmax(const OpArgs& a) {
  attn_softmax_fwd(*a.in[0], *a.out[0], a.attn, a.w);
}
void CpuBackend::bwd_AttnSoftmax(const OpArgs& a) {
  attn_softmax_bwd(*a.in[0], *a.out[0], *a.dout[0], *a.din[0], a.attn, a.w, a.dw);
}
void CpuBackend::fwd_AttnPV(const OpArgs& a) { attn_pv_fwd(*a.in[0], *a.in[1], *a.out[0], a.attn); }
void CpuBackend::bwd_AttnPV(const OpArgs& a) {
  attn_pv_bwd(*a.in[0], *a.in[1], *a.dout[0], *a.din[0], *a.din[1], a.attn, a.acc[0]);
}

}  // namespace remat
