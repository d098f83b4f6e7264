// The mixture-of-experts ops (model/moe_config.h): routing, the tokens permuted into the
// experts' rows, the experts' projections on their rows, and the weighted sum back in token
// order. The routing table (i32): per (token, choice) its expert, then its row in the permuted
// buffer (-1: dropped by the capacity), then per expert its first row and its row count. Also
// the shared experts' sigmoid gate (SigmoidGate).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"
#include "core/backend/moe_aux.h"
#include "core/backend/moe_rows.h"

namespace remat {

using cpu::FV;

namespace {

// The routing table's parts (moe_rows.h MoeTable).
struct Routing {
  std::int32_t *expert, *row, *start, *count;
  Routing(const Tensor& t, const MoeDims& d) {
    auto* p = t.as<std::int32_t>();
    const MoeTable tb(d);
    expert = p, row = p + tb.row, start = p + tb.start, count = p + tb.count;
  }
};

void check_moe(const MoeDims& d, const char* op) { check_moe_dims(d, "cpu", op); }

void check_routing(const Tensor& r, const MoeDims& d, const char* op) {
  cpu::check_dtype(r, DType::I32, op, "routing", MoeTable(d).entries);
}

}  // namespace

namespace {

// The routing's scratch in the workspace: the fp32 weights, the choices bucketed by expert, and
// per lane a token's scores, chosen experts, their weights (backward: gradients).
struct RouteWs {
  float* w32 = nullptr;
  std::int64_t *ids = nullptr, *off = nullptr;
  float *s = nullptr, *w = nullptr, *ds = nullptr;
  int* chosen = nullptr;
  RouteWs(cpu::Arena& a, const MoeDims& d, int lanes, bool forward) {
    const std::int64_t n = d.tokens * d.top_k;
    if (forward) {
      w32 = a.take<float>(n);
      ids = a.take<std::int64_t>(n);
      off = a.take<std::int64_t>(d.experts + 1);
    }
    s = a.take<float>(static_cast<std::int64_t>(lanes) * d.experts);
    w = a.take<float>(static_cast<std::int64_t>(lanes) * d.top_k);
    ds = a.take<float>(static_cast<std::int64_t>(lanes) * d.top_k);
    chosen = a.take<int>(static_cast<std::int64_t>(lanes) * d.top_k);
  }
};

}  // namespace

std::uint64_t CpuBackend::ws_moe_route(const MoeDims& d) const {
  cpu::Arena f, b;
  RouteWs wf(f, d, threads_, true), wb(b, d, threads_, false);
  return std::max(f.used(), b.used());
}

namespace {

// The layer's statistics for the load-balancing loss (backend/moe_aux.h): each expert's choices
// and the sum of its probability over the tokens, token by token in order (double), so the bits
// depend on nothing but the values.
void route_stats(const Tensor& aux, const MoeDims& d, const FV& logits, const std::int32_t* expert,
                 const MoeRouter& router) {
  const int E = d.experts;
  cpu::check_float(aux, "moe_route_fwd", "load-balancing statistics", 2 * static_cast<std::int64_t>(E));
  if (router.sigmoid) throw Error("cpu moe_route_fwd: the load-balancing loss takes a softmax router");
  std::vector<double> sum(static_cast<std::size_t>(E), 0.0), count(static_cast<std::size_t>(E), 0.0);
  for (std::int64_t t = 0; t < d.tokens; ++t) {
    const MoeScores scores([&](int e) { return logits[t * E + e]; }, router);
    for (int e = 0; e < E; ++e) sum[static_cast<std::size_t>(e)] += scores(e);
  }
  for (std::int64_t i = 0; i < d.tokens * d.top_k; ++i) count[static_cast<std::size_t>(expert[i])] += 1.0;
  FV out(aux);
  for (int e = 0; e < E; ++e) {
    out.set(e, static_cast<float>(count[static_cast<std::size_t>(e)]));
    out.set(E + e, static_cast<float>(sum[static_cast<std::size_t>(e)]));
  }
}

}  // namespace

void CpuBackend::moe_aux_loss(const Tensor& aux, int layers, int experts, std::int64_t tokens, double coef,
                              double grad_scale) {
  const MoeAuxLayout L{layers, experts};
  cpu::check_dtype(aux, DType::F32, "moe_aux_loss", "buffer", L.size());
  float* p = aux.as<float>();
  moe_aux_loss_of(L, p, tokens, coef, grad_scale, p + L.grad(), p + L.loss());
}

void CpuBackend::fwd_MoeRoute(const OpArgs& a) {
  const char* op = "moe_route_fwd";
  const MoeDims& d = a.moe;
  check_moe(d, op);
  const int E = d.experts, k = d.top_k;
  const std::int64_t T = d.tokens;
  cpu::check_float(*a.in[0], op, "logits", T * E);
  cpu::check_float(*a.out[0], op, "weights", T * k);
  check_routing(*a.out[1], d, op);
  const bool has_bias = a.b && *a.b;
  if (has_bias) cpu::check_float(*a.b, op, "bias", E);
  const FV logits(*a.in[0]), wv(*a.out[0]), bias = has_bias ? FV(*a.b) : FV();
  Routing r(*a.out[1], d);
  cpu::Arena arena(ws_, op);
  RouteWs ws(arena, d, threads_, true);
  const MoeRouter router = moe_router(d);
  // Per token (backend/moe_score.h): its scores once, the choice, the weights (fp32, kept for
  // the capacity's choice before they are rounded).
  cpu::parallel_for(*pool_, T, 64, [&](std::int64_t t0, std::int64_t t1, int lane) {
    float* s = ws.s + static_cast<std::int64_t>(lane) * E;
    float* w = ws.w + static_cast<std::int64_t>(lane) * k;
    int* chosen = ws.chosen + static_cast<std::int64_t>(lane) * k;
    auto score = [&](int e) { return s[e]; };
    auto sel_bias = [&](int e) { return has_bias ? bias[e] : 0.0f; };
    for (std::int64_t t = t0; t < t1; ++t) {
      const MoeScores scores([&](int e) { return logits[t * E + e]; }, router);
      for (int e = 0; e < E; ++e) s[e] = scores(e);
      moe_choose(router, score, sel_bias, chosen, w);
      for (int j = 0; j < k; ++j) {
        r.expert[t * k + j] = chosen[j];
        ws.w32[t * k + j] = w[j];
        wv.set(t * k + j, w[j]);
      }
    }
  });
  moe_assign_rows(d, r.expert, ws.w32, r.row, r.start, r.count, ws.ids, ws.off);
  if (a.aux) route_stats(*a.aux, d, logits, r.expert, router);
}

void CpuBackend::bwd_MoeRoute(const OpArgs& a) {
  const char* op = "moe_route_bwd";
  const MoeDims& d = a.moe;
  check_moe(d, op);
  if (!a.din[0]) return;
  const int E = d.experts, k = d.top_k;
  const std::int64_t T = d.tokens;
  cpu::check_float(*a.in[0], op, "logits", T * E);
  cpu::check_float(*a.dout[0], op, "dweights", T * k);
  cpu::check_float(*a.din[0], op, "dlogits", T * E);
  check_routing(*a.out[1], d, op);
  const FV logits(*a.in[0]), dwv(*a.dout[0]), dl(*a.din[0]);
  const Routing r(*a.out[1], d);
  const bool acc = a.acc[0];
  if (a.aux) cpu::check_dtype(*a.aux, DType::F32, op, "load-balancing gradient", E);
  const float* aux = a.aux ? a.aux->as<const float>() : nullptr;
  cpu::Arena arena(ws_, op);
  RouteWs ws(arena, d, threads_, false);
  const MoeRouter router = moe_router(d);
  cpu::parallel_for(*pool_, T, 64, [&](std::int64_t t0, std::int64_t t1, int lane) {
    float* s = ws.s + static_cast<std::int64_t>(lane) * E;
    float* dw = ws.w + static_cast<std::int64_t>(lane) * k;
    float* ds = ws.ds + static_cast<std::int64_t>(lane) * k;
    auto score = [&](int e) { return s[e]; };
    for (std::int64_t t = t0; t < t1; ++t) {
      const MoeScores scores([&](int e) { return logits[t * E + e]; }, router);
      for (int e = 0; e < E; ++e) s[e] = scores(e);
      for (int j = 0; j < k; ++j) dw[j] = dwv[t * k + j];
      moe_score_grad(router, score, r.expert + t * k, dw, ds, [&](int e, float g) { dl.put(t * E + e, g, acc); }, aux);
    }
  });
}

void CpuBackend::fwd_MoePermute(const OpArgs& a) {
  const char* op = "moe_permute_fwd";
  const MoeDims& d = a.moe;
  check_moe(d, op);
  const int H = a.K, k = d.top_k;
  const std::int64_t R = d.rows();
  cpu::check_float(*a.in[0], op, "x", d.tokens * H);
  check_routing(*a.in[1], d, op);
  cpu::check_float(*a.out[0], op, "xp", R * H);
  if (a.out[0]->dtype != a.in[0]->dtype) throw Error("cpu moe_permute_fwd: x and xp differ in dtype");
  const Routing r(*a.in[1], d);
  if (d.capacity > 0) fill_zero(*a.out[0]);  // the padding rows
  if (d.weight_input) {  // each row x · w, rounded once
    cpu::check_float(*a.in[2], op, "weights", d.tokens * k);
    const FV x(*a.in[0]), w(*a.in[2]), xp(*a.out[0]);
    cpu::parallel_for(*pool_, d.tokens * k, 64, [&](std::int64_t i0, std::int64_t i1, int) {
      for (std::int64_t i = i0; i < i1; ++i)
        if (const std::int32_t row = r.row[i]; row >= 0)
          for (int h = 0; h < H; ++h) xp.set(row * H + h, x[(i / k) * H + h] * w[i]);
    });
    return;
  }
  const std::size_t row_bytes = static_cast<std::size_t>(H) * dtype_size(a.in[0]->dtype);
  const char* x = static_cast<const char*>(a.in[0]->data);
  char* xp = static_cast<char*>(a.out[0]->data);
  cpu::parallel_for(*pool_, d.tokens * k, 256, [&](std::int64_t i0, std::int64_t i1, int) {
    for (std::int64_t i = i0; i < i1; ++i)
      if (r.row[i] >= 0) std::copy_n(x + (i / k) * row_bytes, row_bytes, xp + r.row[i] * row_bytes);
  });
}

// dx: the sum of a token's rows' gradients (times their weights under weight_input); there,
// also dweights: each row's gradient · x, summed in column order (0 where dropped).
void CpuBackend::bwd_MoePermute(const OpArgs& a) {
  const char* op = "moe_permute_bwd";
  const MoeDims& d = a.moe;
  check_moe(d, op);
  const int H = a.K, k = d.top_k;
  cpu::check_float(*a.dout[0], op, "dxp", d.rows() * H);
  check_routing(*a.in[1], d, op);
  const Routing r(*a.in[1], d);
  const FV dxp(*a.dout[0]);
  const bool weighted = d.weight_input;
  if (weighted) cpu::check_float(*a.in[2], op, "weights", d.tokens * k);
  const FV w = weighted ? FV(*a.in[2]) : FV();
  if (a.din[0] && *a.din[0]) {
    cpu::check_float(*a.din[0], op, "dx", d.tokens * H);
    const FV dx(*a.din[0]);
    const bool acc = a.acc[0];
    cpu::parallel_for(*pool_, d.tokens, 16, [&](std::int64_t t0, std::int64_t t1, int) {
      for (std::int64_t t = t0; t < t1; ++t)
        for (int h = 0; h < H; ++h) {
          float s = 0.0f;
          for (int j = 0; j < k; ++j)
            if (const std::int32_t row = r.row[t * k + j]; row >= 0)
              s += weighted ? w[t * k + j] * dxp[row * H + h] : dxp[row * H + h];
          dx.put(t * H + h, s, acc);
        }
    });
  }
  if (weighted && a.din[2] && *a.din[2]) {
    cpu::check_float(*a.in[0], op, "x", d.tokens * H);
    cpu::check_float(*a.din[2], op, "dweights", d.tokens * k);
    const FV x(*a.in[0]), dw(*a.din[2]);
    const bool acc = a.acc[2];
    cpu::parallel_for(*pool_, d.tokens * k, 64, [&](std::int64_t i0, std::int64_t i1, int) {
      for (std::int64_t i = i0; i < i1; ++i) {
        float s = 0.0f;
        if (const std::int32_t row = r.row[i]; row >= 0)
          for (int h = 0; h < H; ++h) s += dxp[row * H + h] * x[(i / k) * H + h];
        dw.put(i, s, acc);
      }
    });
  }
}

// Both passes: the checks once, then one GEMM per expert over its rows (cpu_expert_gemm.cpp).
void CpuBackend::expert_linear(const OpArgs& a, Pass pass) {
  const bool bwd = pass == Pass::Backward;
  const char* op = bwd ? "expert_linear_bwd" : "expert_linear_fwd";
  const MoeDims& d = a.moe;
  check_moe(d, op);
  const int K = a.K, N = a.N;
  const std::int64_t NK = static_cast<std::int64_t>(N) * K;
  cpu::check_float(*a.in[0], op, "x", a.M * K);
  check_routing(*a.in[1], d, op);
  if (bwd && a.din[0] && *a.din[0]) cpu::check_float(*a.din[0], op, "dx", a.M * K);
  cpu::check_float(bwd ? *a.dout[0] : *a.out[0], op, bwd ? "dy" : "y", a.M * N);
  cpu::check_float(bwd ? *a.dw : *a.w, op, bwd ? "dW" : "W", NK * d.experts);
  if (const Tensor* b = bwd ? a.db : a.b) cpu::check_float(*b, op, bwd ? "dB" : "B", static_cast<std::int64_t>(N) * d.experts);
  const Routing r(*a.in[1], d);
  std::vector<std::int64_t> start(static_cast<std::size_t>(d.experts)), rows(start.size());
  for (int e = 0; e < d.experts; ++e) start[e] = r.start[e], rows[e] = moe_expert_rows(d, r.count[e]);
  expert_gemms(a, pass, start, rows);
}

void CpuBackend::fwd_ExpertLinear(const OpArgs& a) { expert_linear(a, Pass::Forward); }
void CpuBackend::bwd_ExpertLinear(const OpArgs& a) { expert_linear(a, Pass::Backward); }

void CpuBackend::fwd_MoeUnpermute(const OpArgs& a) {
  const char* op = "moe_unpermute_fwd";
  const MoeDims& d = a.moe;
  check_moe(d, op);
  const int H = a.K, k = d.top_k;
  cpu::check_float(*a.in[0], op, "yp", d.rows() * H);
  cpu::check_float(*a.in[1], op, "weights", d.tokens * k);
  check_routing(*a.in[2], d, op);
  cpu::check_float(*a.out[0], op, "y", d.tokens * H);
  const Routing r(*a.in[2], d);
  const bool shared = a.in[3] && *a.in[3];
  if (shared) cpu::check_float(*a.in[3], op, "shared", d.tokens * H);
  const FV yp(*a.in[0]), w(*a.in[1]), y(*a.out[0]), sh = shared ? FV(*a.in[3]) : FV();
  const bool unit = d.weight_input;  // the weights went into the rows (MoePermute): a plain sum
  cpu::parallel_for(*pool_, d.tokens, 16, [&](std::int64_t t0, std::int64_t t1, int) {
    for (std::int64_t t = t0; t < t1; ++t)
      for (int h = 0; h < H; ++h) {
        float s = 0.0f;
        for (int j = 0; j < k; ++j)
          if (const std::int32_t row = r.row[t * k + j]; row >= 0) s += unit ? yp[row * H + h] : w[t * k + j] * yp[row * H + h];
        y.set(t * H + h, shared ? s + sh[t * H + h] : s);
      }
  });
}

void CpuBackend::bwd_MoeUnpermute(const OpArgs& a) {
  const char* op = "moe_unpermute_bwd";
  const MoeDims& d = a.moe;
  check_moe(d, op);
  const int H = a.K, k = d.top_k;
  const std::int64_t R = d.rows();
  cpu::check_float(*a.in[0], op, "yp", R * H);
  cpu::check_float(*a.in[1], op, "weights", d.tokens * k);
  check_routing(*a.in[2], d, op);
  cpu::check_float(*a.dout[0], op, "dy", d.tokens * H);
  const Routing r(*a.in[2], d);
  const FV yp(*a.in[0]), w(*a.in[1]), dy(*a.dout[0]);
  if (a.din[0] && *a.din[0]) {  // dyp: w · dy on a token's rows, zero on padding rows
    cpu::check_float(*a.din[0], op, "dyp", R * H);
    const FV dyp(*a.din[0]);
    const bool acc = a.acc[0];
    if (!acc && d.capacity > 0) fill_zero(*a.din[0]);
    cpu::parallel_for(*pool_, d.tokens * k, 64, [&](std::int64_t i0, std::int64_t i1, int) {
      for (std::int64_t i = i0; i < i1; ++i) {
        const std::int32_t row = r.row[i];
        if (row < 0) continue;
        const float wi = d.weight_input ? 1.0f : w[i];
        for (int h = 0; h < H; ++h) dyp.put(row * H + h, wi * dy[(i / k) * H + h], acc);
      }
    });
  }
  if (a.din[3] && *a.din[3]) {  // the shared experts' output: dout itself
    cpu::check_float(*a.din[3], op, "dshared", d.tokens * H);
    cpu::copy_floats(*pool_, dy, FV(*a.din[3]), d.tokens * H, a.acc[3]);
  }
  if (a.din[1] && *a.din[1]) {  // dw: dy · yp of its row, 0 where dropped (all 0 under weight_input)
    cpu::check_float(*a.din[1], op, "dweights", d.tokens * k);
    const FV dw(*a.din[1]);
    const bool acc = a.acc[1];
    cpu::parallel_for(*pool_, d.tokens * k, 64, [&](std::int64_t i0, std::int64_t i1, int) {
      for (std::int64_t i = i0; i < i1; ++i) {
        const std::int32_t row = r.row[i];
        float s = 0.0f;
        if (row >= 0 && !d.weight_input)
          for (int h = 0; h < H; ++h) s += dy[(i / k) * H + h] * yp[row * H + h];
        dw.put(i, s, acc);
      }
    });
  }
}

}  // namespace remat

namespace remat {

void CpuBackend::fwd_SigmoidGate(const OpArgs& a) {
  const char* op = "sigmoid_gate_fwd";
  const std::int64_t M = a.M;
  const int K = a.K;
  cpu::check_float(*a.in[0], op, "x", M * K);
  cpu::check_float(*a.in[1], op, "g", M);
  cpu::check_float(*a.out[0], op, "y", M * K);
  const FV x(*a.in[0]), g(*a.in[1]), y(*a.out[0]);
  cpu::parallel_for(*pool_, M, 16, [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float s = 1.0f / (1.0f + std::exp(-g[r]));
      for (int c = 0; c < K; ++c) y.set(r * K + c, s * x[r * K + c]);
    }
  });
}

void CpuBackend::bwd_SigmoidGate(const OpArgs& a) {
  const char* op = "sigmoid_gate_bwd";
  const std::int64_t M = a.M;
  const int K = a.K;
  cpu::check_float(*a.in[0], op, "x", M * K);
  cpu::check_float(*a.in[1], op, "g", M);
  cpu::check_float(*a.dout[0], op, "dy", M * K);
  const FV x(*a.in[0]), g(*a.in[1]), dy(*a.dout[0]);
  const bool has_dx = a.din[0] && *a.din[0], has_dg = a.din[1] && *a.din[1];
  if (has_dx) cpu::check_float(*a.din[0], op, "dx", M * K);
  if (has_dg) cpu::check_float(*a.din[1], op, "dg", M);
  const FV dx = has_dx ? FV(*a.din[0]) : FV(), dg = has_dg ? FV(*a.din[1]) : FV();
  cpu::parallel_for(*pool_, M, 16, [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float s = 1.0f / (1.0f + std::exp(-g[r]));
      float dot = 0.0f;
      for (int c = 0; c < K; ++c) {
        dot += dy[r * K + c] * x[r * K + c];
        if (has_dx) dx.put(r * K + c, s * dy[r * K + c], a.acc[0]);
      }
      if (has_dg) dg.put(r, dot * s * (1.0f - s), a.acc[1]);
    }
  });
}

}  // namespace remat
