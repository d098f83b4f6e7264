// The sink gradients of attention (cpu_attention_sinks.h): one pass per head after the backward
// op's own, on the reference loops for both the GEMM path and the scalar one (the scores are
// recomputed once per head, as cheap as a forward).
#include "core/backend/cpu/cpu_attention_sinks.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace remat::cpu::attn {

void check_sinks(const AttnDims& a, const char* op, const Tensor* sinks, const Tensor* dsinks,
                 bool backward) {
  if (!sinks) return;
  check_float(*sinks, op, "sinks", a.heads);
  if (!backward) return;
  if (!dsinks) throw Error(std::string("cpu ") + op + ": attention sinks without their gradient");
  check_float(*dsinks, op, "sink gradient", a.heads);
}

double sink_row_term(const float* s, int n, double sink, FV P, FV dP, std::int64_t at) {
  double m = sink;
  for (int c = 0; c < n; ++c) m = std::max(m, static_cast<double>(s[c]));
  double z = std::exp(sink - m), rs = 0.0;
  for (int c = 0; c < n; ++c) z += std::exp(s[c] - m);
  for (int c = 0; c < n; ++c) rs += static_cast<double>(P[at + c]) * dP[at + c];
  return std::exp(sink - m) / z * rs;
}

void naive_sink_grad(ThreadPool& pool, const AttnWs& ws, const AttnDims& a, FV qkv, FV P, FV dP,
                     FV sinks, FV dsinks) {
  const Layout L(a);
  const float cap = a.softcap;
  parallel_for(pool, a.heads, 1, [&](std::int64_t h0, std::int64_t h1, int lane) {
    float* K = ws.kv_of(lane);
    float* s = ws.row_of(lane);
    float* q = ws.vec_of(lane);
    for (std::int64_t hh = h0; hh < h1; ++hh) {
      const int h = static_cast<int>(hh);
      const double sink = sinks[h];
      double acc = 0.0;
      for (int b = 0; b < a.B; ++b) {
        stage_kv_head(qkv, L.width, L.k_col(h / L.group), b, L.S, L.d, K);
        for (int i = 0; i < L.S; ++i) {
          const std::int64_t qr = L.row(b, i) + L.q_col(h), pr = L.prob_row(b, h, i);
          for (int c = 0; c < L.d; ++c) q[c] = qkv[qr + c];
          const int j0 = a.first_key(i), n = i - j0 + 1;
          scaled_scores(q, K, j0, n, L.d, a.scale, s);
          if (cap > 0.0f) soft_cap(s, n, cap);
          acc += sink_row_term(s, n, sink, P, dP, pr + j0);
        }
      }
      dsinks.set(h, dsinks[h] - static_cast<float>(acc));
    }
  });
}

void flash_sink_grad(ThreadPool& pool, const AttnDims& a, FV ctx, FV dctx, const float* lse,
                     FV sinks, FV dsinks) {
  const Layout L(a);
  parallel_for(pool, a.heads, 1, [&](std::int64_t h0, std::int64_t h1, int) {
    for (std::int64_t hh = h0; hh < h1; ++hh) {
      const int h = static_cast<int>(hh);
      const double sink = sinks[h];
      double acc = 0.0;
      for (int b = 0; b < a.B; ++b)
        for (int i = 0; i < L.S; ++i) {
          const std::int64_t cr = L.ctx(b, i, h);
          double D = 0.0;
          for (int c = 0; c < L.dv; ++c) D += static_cast<double>(dctx[cr + c]) * ctx[cr + c];
          const std::int64_t li = (static_cast<std::int64_t>(b) * L.heads + h) * L.S + i;
          acc += std::exp(sink - lse[li]) * D;
        }
      dsinks.set(h, dsinks[h] - static_cast<float>(acc));
    }
  });
}

}  // namespace remat::cpu::attn
