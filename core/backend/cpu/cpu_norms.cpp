// LayerNorm (biased variance, as PyTorch) and RMSNorm over rows of width H, and QK-norm (RMSNorm
// of the q part and of the k part of each qkv row, or of each of their heads). Backward recomputes the row statistics from
// x; parameter gradients are column sums over rows taken in row order.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"

namespace remat {

using cpu::FV;

namespace {

struct NormBwdWs {
  float* stats = nullptr;  // per row: mean, rstd (rmsnorm: 0, rstd)
  NormBwdWs(cpu::Arena& a, std::int64_t rows) { stats = a.take<float>(2 * rows); }
};

// The rows a norm runs over: H columns from `off` of rows `ld` apart (whole rows: ld = H).
struct Span {
  std::int64_t rows;
  int H;
  std::int64_t ld, off;
  std::int64_t at(std::int64_t r) const { return r * ld + off; }
};

std::int64_t row_grain(int H) { return std::max<std::int64_t>(1, 8192 / std::max(H, 1)); }

void check_width(std::int64_t rows, int H, const char* op) {
  if (rows <= 0 || H <= 0)
    throw Error(std::string("cpu ") + op + ": bad shape rows=" + std::to_string(rows) +
                " H=" + std::to_string(H));
}

inline void ln_stats(FV x, std::int64_t base, int H, float eps, float& mean, float& rstd) {
  float s = 0.0f;
  for (int c = 0; c < H; ++c) s += x[base + c];
  mean = s / static_cast<float>(H);
  float v = 0.0f;
  for (int c = 0; c < H; ++c) {
    float d = x[base + c] - mean;
    v += d * d;
  }
  rstd = 1.0f / std::sqrt(v / static_cast<float>(H) + eps);
}

inline float rms_rstd(FV x, std::int64_t base, int H, float eps) {
  float s = 0.0f;
  for (int c = 0; c < H; ++c) {
    float v = x[base + c];
    s += v * v;
  }
  return 1.0f / std::sqrt(s / static_cast<float>(H) + eps);
}

// dw[c] += sum_r dy[r,c] * xhat[r,c] and db[c] += sum_r dy[r,c], rows in order; xhat from the
// stats. Parallel over blocks of columns.
void param_grads(cpu::ThreadPool& pool, FV x, FV dy, const float* stats, FV dw, FV* db,
                 Span g) {
  const std::int64_t rows = g.rows;
  const int H = g.H;
  std::int64_t blocks = (H + cpu::kColBlock - 1) / cpu::kColBlock;
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(pool, blocks, 1, [&](std::int64_t b0, std::int64_t b1, int) {
    for (std::int64_t blk = b0; blk < b1; ++blk) {
      const int c0 = static_cast<int>(blk) * cpu::kColBlock;
      const int nc = std::min(cpu::kColBlock, H - c0);
      float aw[cpu::kColBlock] = {}, ab[cpu::kColBlock] = {};
      if (k) {
        k->norm_param_cols(x.ref(), dy.ref(), stats, rows, g.ld, g.off, c0, nc, aw, db ? ab : nullptr);
      } else {
        for (std::int64_t r = 0; r < rows; ++r) {
          const float mean = stats[2 * r], rstd = stats[2 * r + 1];
          const std::int64_t base = g.at(r) + c0;
          for (int c = 0; c < nc; ++c) {
            const float d = dy[base + c];
            aw[c] += d * ((x[base + c] - mean) * rstd);
            ab[c] += d;
          }
        }
      }
      for (int c = 0; c < nc; ++c) {
        dw.set(c0 + c, dw[c0 + c] + aw[c]);
        if (db) db->set(c0 + c, (*db)[c0 + c] + ab[c]);
      }
    }
  });
}

// The weight is applied as (off + w[c]) in fp32 (off = 1: Gemma's (1 + w) RMSNorm).
void rms_fwd(cpu::ThreadPool& pool, FV x, FV w, FV y, Span g, float eps, float off) {
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(pool, g.rows, row_grain(g.H), [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t base = g.at(r);
      if (k) {
        k->rms_fwd_row(x.ref(), w.ref(), y.ref(), base, g.H, eps, off);
        continue;
      }
      const float rstd = rms_rstd(x, base, g.H, eps);
      for (int c = 0; c < g.H; ++c) y.set(base + c, x[base + c] * rstd * (off + w[c]));
    }
  });
}

// dx (acc: +=, with the weight (off + w)) and the rows' rstd into stats; dw += sum dy * xhat
// (unless dw is null).
void rms_bwd(cpu::ThreadPool& pool, FV x, FV w, FV dy, FV dx, FV dw, float* stats, Span g,
             float eps, bool acc, float off) {
  const int H = g.H;
  const float invH = 1.0f / static_cast<float>(H);
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(pool, g.rows, row_grain(H), [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t base = g.at(r);
      if (k) {
        k->rms_bwd_row(x.ref(), w.ref(), dy.ref(), dx.ref(), base, H, eps, acc, off, stats + 2 * r);
        continue;
      }
      const float rstd = rms_rstd(x, base, H, eps);
      stats[2 * r] = 0.0f;
      stats[2 * r + 1] = rstd;
      float sgx = 0.0f;
      for (int c = 0; c < H; ++c) sgx += dy[base + c] * (off + w[c]) * (x[base + c] * rstd);
      const float mgx = sgx * invH;
      for (int c = 0; c < H; ++c) {
        const float xhat = x[base + c] * rstd;
        dx.put(base + c, rstd * (dy[base + c] * (off + w[c]) - xhat * mgx), acc);
      }
    }
  });
  if (dw.p) param_grads(pool, x, dy, stats, dw, nullptr, g);
}

}  // namespace

std::uint64_t CpuBackend::ws_norm_bwd(std::int64_t rows) const {
  cpu::Arena a;
  NormBwdWs w(a, rows);
  return a.used();
}

void CpuBackend::layernorm_fwd(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                               std::int64_t rows, int H, float eps) {
  const char* op = "layernorm_fwd";
  check_width(rows, H, op);
  cpu::check_float(x, op, "x", rows * H);
  cpu::check_float(w, op, "w", H);
  const bool has_b = static_cast<bool>(b);
  if (has_b) cpu::check_float(b, op, "b", H);
  cpu::check_float(y, op, "y", rows * H);
  FV xv(x), wv(w), bv = has_b ? FV(b) : FV(), yv(y);
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, rows, row_grain(H), [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t base = r * H;
      if (k) {
        k->ln_fwd_row(xv.ref(), wv.ref(), bv.ref(), yv.ref(), base, H, eps);
        continue;
      }
      float mean, rstd;
      ln_stats(xv, base, H, eps, mean, rstd);
      for (int c = 0; c < H; ++c) {
        float v = (xv[base + c] - mean) * rstd * wv[c];
        if (has_b) v += bv[c];
        yv.set(base + c, v);
      }
    }
  });
}

void CpuBackend::layernorm_bwd(const Tensor& x, const Tensor& w, const Tensor& dy,
                               const Tensor& dx, const Tensor& dw, const Tensor& db,
                               std::int64_t rows, int H, float eps, bool acc) {
  const char* op = "layernorm_bwd";
  check_width(rows, H, op);
  cpu::check_float(x, op, "x", rows * H);
  cpu::check_float(w, op, "w", H);
  cpu::check_float(dy, op, "dy", rows * H);
  cpu::check_float(dx, op, "dx", rows * H);
  cpu::check_float(dw, op, "dw", H);
  const bool has_db = static_cast<bool>(db);
  if (has_db) cpu::check_float(db, op, "db", H);
  cpu::Arena arena(ws_, op);
  NormBwdWs ws(arena, rows);
  FV xv(x), wv(w), dyv(dy), dxv(dx);
  float* stats = ws.stats;
  const float invH = 1.0f / static_cast<float>(H);
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, rows, row_grain(H), [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t base = r * H;
      if (k) {
        k->ln_bwd_row(xv.ref(), wv.ref(), dyv.ref(), dxv.ref(), base, H, eps, acc, stats + 2 * r);
        continue;
      }
      float mean, rstd;
      ln_stats(xv, base, H, eps, mean, rstd);
      stats[2 * r] = mean;
      stats[2 * r + 1] = rstd;
      float sg = 0.0f, sgx = 0.0f;
      for (int c = 0; c < H; ++c) {
        const float g = dyv[base + c] * wv[c];
        sg += g;
        sgx += g * ((xv[base + c] - mean) * rstd);
      }
      const float mg = sg * invH, mgx = sgx * invH;
      for (int c = 0; c < H; ++c) {
        const float g = dyv[base + c] * wv[c];
        const float xhat = (xv[base + c] - mean) * rstd;
        dxv.put(base + c, rstd * (g - mg - xhat * mgx), acc);
      }
    }
  });
  FV dbv = has_db ? FV(db) : FV();
  param_grads(*pool_, xv, dyv, stats, FV(dw), has_db ? &dbv : nullptr, Span{rows, H, H, 0});
}

void CpuBackend::rmsnorm_fwd(const Tensor& x, const Tensor& w, const Tensor& y,
                             std::int64_t rows, int H, float eps, float w_offset) {
  const char* op = "rmsnorm_fwd";
  check_width(rows, H, op);
  cpu::check_float(x, op, "x", rows * H);
  cpu::check_float(w, op, "w", H);
  cpu::check_float(y, op, "y", rows * H);
  rms_fwd(*pool_, FV(x), FV(w), FV(y), Span{rows, H, H, 0}, eps, w_offset);
}

void CpuBackend::rmsnorm_bwd(const Tensor& x, const Tensor& w, const Tensor& dy,
                             const Tensor& dx, const Tensor& dw, std::int64_t rows, int H,
                             float eps, bool acc, float w_offset) {
  const char* op = "rmsnorm_bwd";
  check_width(rows, H, op);
  cpu::check_float(x, op, "x", rows * H);
  cpu::check_float(w, op, "w", H);
  cpu::check_float(dy, op, "dy", rows * H);
  cpu::check_float(dx, op, "dx", rows * H);
  cpu::check_float(dw, op, "dw", H);
  cpu::Arena arena(ws_, op);
  NormBwdWs ws(arena, rows);
  rms_bwd(*pool_, FV(x), FV(w), FV(dy), FV(dx), FV(dw), ws.stats, Span{rows, H, H, 0}, eps, acc,
          w_offset);
}

}  // namespace remat

namespace remat {

namespace {
void no_offset(const OpArgs& a, const char* op) {
  if (a.w_offset != 0.0f) throw Error(std::string("cpu ") + op + ": a (w_offset + w) weight is not supported");
}
}  // namespace

void CpuBackend::fwd_LayerNorm(const OpArgs& a) {
  no_offset(a, "layernorm_fwd");
  layernorm_fwd(*a.in[0], *a.w, *a.b, *a.out[0], a.M, a.K, a.eps);
}
void CpuBackend::bwd_LayerNorm(const OpArgs& a) {
  layernorm_bwd(*a.in[0], *a.w, *a.dout[0], *a.din[0], *a.dw, *a.db, a.M, a.K, a.eps, a.acc[0]);
}
void CpuBackend::fwd_RmsNorm(const OpArgs& a) {
  rmsnorm_fwd(*a.in[0], *a.w, *a.out[0], a.M, a.K, a.eps, a.w_offset);
}
void CpuBackend::bwd_RmsNorm(const OpArgs& a) {
  rmsnorm_bwd(*a.in[0], *a.w, *a.dout[0], *a.din[0], *a.dw, a.M, a.K, a.eps, a.acc[0],
              a.w_offset);
}

// QK-norm: rows of in[0] are q (K wide) | k (N) | v (N); q is normalized with w, k with b, v
// copied. Backward: dw and db (the k weight's gradient) accumulate, din[0] is added into
// when acc[0].
namespace {
struct QkSpans {
  Span q, k;
  std::int64_t width;
};
// The projection-wide op takes no offset (`offset`: the per-head one does).
QkSpans qk_spans(const OpArgs& a, const char* op, bool offset = false) {
  if (!offset) no_offset(a, op);
  check_width(a.M, a.K, op);
  check_width(a.M, a.N, op);
  const std::int64_t w = static_cast<std::int64_t>(a.K) + 2 * static_cast<std::int64_t>(a.N);
  return {Span{a.M, a.K, w, 0}, Span{a.M, a.N, w, a.K}, w};
}
// The v columns [K + N, width) of the qkv rows: src's into dst, or added to it (acc).
void v_part(cpu::ThreadPool& pool, FV src, FV dst, const QkSpans& sp, bool acc) {
  const std::int64_t w = sp.width, v0 = sp.q.H + sp.k.H;
  cpu::parallel_for(pool, sp.q.rows, row_grain(sp.k.H), [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t c = v0; c < w; ++c) dst.put(r * w + c, src[r * w + c], acc);
  });
}
}  // namespace

void CpuBackend::fwd_QkNorm(const OpArgs& a) {
  const char* op = "qk_norm_fwd";
  const QkSpans sp = qk_spans(a, op);
  cpu::check_float(*a.in[0], op, "qkv", a.M * sp.width);
  cpu::check_float(*a.out[0], op, "out", a.M * sp.width);
  cpu::check_float(*a.w, op, "q weight", a.K);
  cpu::check_float(*a.b, op, "k weight", a.N);
  FV x(*a.in[0]), y(*a.out[0]);
  rms_fwd(*pool_, x, FV(*a.w), y, sp.q, a.eps, 0.0f);
  rms_fwd(*pool_, x, FV(*a.b), y, sp.k, a.eps, 0.0f);
  v_part(*pool_, x, y, sp, false);
}

void CpuBackend::bwd_QkNorm(const OpArgs& a) {
  const char* op = "qk_norm_bwd";
  const QkSpans sp = qk_spans(a, op);
  cpu::check_float(*a.in[0], op, "qkv", a.M * sp.width);
  cpu::check_float(*a.dout[0], op, "dout", a.M * sp.width);
  cpu::check_float(*a.din[0], op, "dqkv", a.M * sp.width);
  cpu::check_float(*a.w, op, "q weight", a.K);
  cpu::check_float(*a.b, op, "k weight", a.N);
  cpu::check_float(*a.dw, op, "q weight gradient", a.K);
  cpu::check_float(*a.db, op, "k weight gradient", a.N);
  cpu::Arena arena(ws_, op);
  NormBwdWs ws(arena, a.M);
  FV x(*a.in[0]), dy(*a.dout[0]), dx(*a.din[0]);
  const bool acc = a.acc[0];
  rms_bwd(*pool_, x, FV(*a.w), dy, dx, FV(*a.dw), ws.stats, sp.q, a.eps, acc, 0.0f);
  rms_bwd(*pool_, x, FV(*a.b), dy, dx, FV(*a.db), ws.stats, sp.k, a.eps, acc, 0.0f);
  v_part(*pool_, dy, dx, sp, acc);
}

// QK-norm per head (Qwen3; Gemma 3 with the weight as (1 + w)): every d-wide head of the q part
// normalized with w, of the k part with b, v copied. The heads run one after another, each over
// all rows; dw and db accumulate the heads' sums in head order.
namespace {
struct HeadSpans {
  QkSpans qk;
  int d;
};
HeadSpans head_spans(const OpArgs& a, const char* op) {
  const QkSpans sp = qk_spans(a, op, true);
  const int d = a.attn.d;
  if (d <= 0 || a.K % d != 0 || a.N % d != 0)
    throw Error(std::string("cpu ") + op + ": q width " + std::to_string(a.K) + " and k width " +
                std::to_string(a.N) + " are not whole heads of " + std::to_string(d));
  return {sp, d};
}
// Calls f(span of one head, weight is k) for every q head, then every k head.
template <class F>
void each_head(const HeadSpans& h, F f) {
  for (std::int64_t c = 0; c < h.qk.q.H; c += h.d) f(Span{h.qk.q.rows, h.d, h.qk.width, c}, false);
  for (std::int64_t c = 0; c < h.qk.k.H; c += h.d) f(Span{h.qk.k.rows, h.d, h.qk.width, h.qk.q.H + c}, true);
}

// The weights of the q and k heads: w and b, or ones (held in `ones`) when the norm has none.
std::pair<FV, FV> head_weights(const OpArgs& a, const HeadSpans& h, const char* op, std::vector<float>& ones) {
  if (!a.w != !a.b) throw Error(std::string("cpu ") + op + ": the q and k weights come together or not at all");
  if (a.w) {
    cpu::check_float(*a.w, op, "q weight", h.d);
    cpu::check_float(*a.b, op, "k weight", h.d);
    return {FV(*a.w), FV(*a.b)};
  }
  if (a.w_offset != 0.0f) throw Error(std::string("cpu ") + op + ": a weight offset without weights");
  ones.assign(static_cast<std::size_t>(h.d), 1.0f);
  FV one;
  one.p = ones.data();
  return {one, one};
}
}  // namespace

void CpuBackend::fwd_QkHeadNorm(const OpArgs& a) {
  const char* op = "qk_head_norm_fwd";
  const HeadSpans h = head_spans(a, op);
  const std::int64_t w = h.qk.width;
  cpu::check_float(*a.in[0], op, "qkv", a.M * w);
  cpu::check_float(*a.out[0], op, "out", a.M * w);
  std::vector<float> ones;
  const std::pair<FV, FV> qk_w = head_weights(a, h, op, ones);  // (no structured binding: lambdas capture it)
  const FV wq = qk_w.first, wk = qk_w.second;
  FV x(*a.in[0]), y(*a.out[0]);
  each_head(h, [&](Span g, bool k) { rms_fwd(*pool_, x, k ? wk : wq, y, g, a.eps, a.w_offset); });
  v_part(*pool_, x, y, h.qk, false);
}

void CpuBackend::bwd_QkHeadNorm(const OpArgs& a) {
  const char* op = "qk_head_norm_bwd";
  const HeadSpans h = head_spans(a, op);
  const std::int64_t w = h.qk.width;
  cpu::check_float(*a.in[0], op, "qkv", a.M * w);
  cpu::check_float(*a.dout[0], op, "dout", a.M * w);
  cpu::check_float(*a.din[0], op, "dqkv", a.M * w);
  std::vector<float> ones;
  const std::pair<FV, FV> qk_w = head_weights(a, h, op, ones);  // (no structured binding: lambdas capture it)
  const FV wq = qk_w.first, wk = qk_w.second;
  FV dwq, dwk;  // null without weights: no weight gradients
  if (a.w) {
    cpu::check_float(*a.dw, op, "q weight gradient", h.d);
    cpu::check_float(*a.db, op, "k weight gradient", h.d);
    dwq = FV(*a.dw);
    dwk = FV(*a.db);
  }
  cpu::Arena arena(ws_, op);
  NormBwdWs ws(arena, a.M);
  FV x(*a.in[0]), dy(*a.dout[0]), dx(*a.din[0]);
  const bool acc = a.acc[0];
  each_head(h, [&](Span g, bool k) {
    rms_bwd(*pool_, x, k ? wk : wq, dy, dx, k ? dwk : dwq, ws.stats, g, a.eps, acc, a.w_offset);
  });
  v_part(*pool_, dy, dx, h.qk, acc);
}

}  // namespace remat

namespace remat {

// QK-norm split over tensor-parallel ranks (backend.h): the per-row partial sums, then the op
// with the sums over the ranks. Scalar loops in the reference's arithmetic, each row's sums in
// column order; the statistic of a row is the whole width's mean.
namespace {

void check_split(Pass pass, const OpArgs& a, const Tensor& sums, const QkSpans& sp, const char* op) {
  cpu::check_float(*a.in[0], op, "qkv", a.M * sp.width);
  cpu::check_dtype(sums, DType::F32, op, "row sums", a.M * (pass == Pass::Forward ? 2 : 4));
  cpu::check_float(*a.w, op, "q weight", a.K);
  cpu::check_float(*a.b, op, "k weight", a.N);
  if (pass == Pass::Forward) {
    cpu::check_float(*a.out[0], op, "out", a.M * sp.width);
    return;
  }
  cpu::check_float(*a.dout[0], op, "dout", a.M * sp.width);
  cpu::check_float(*a.din[0], op, "dqkv", a.M * sp.width);
  cpu::check_float(*a.dw, op, "q weight gradient", a.K);
  cpu::check_float(*a.db, op, "k weight gradient", a.N);
}

float split_rstd(float sum_sq, int width, float eps) {
  return 1.0f / std::sqrt(sum_sq / static_cast<float>(width) + eps);
}

}  // namespace

void CpuBackend::qk_norm_sums(Pass pass, const OpArgs& a, const Tensor& sums) {
  const char* op = pass == Pass::Forward ? "qk_norm_sums_fwd" : "qk_norm_sums_bwd";
  const QkSpans sp = qk_spans(a, op);
  check_split(pass, a, sums, sp, op);
  const bool bwd = pass == Pass::Backward;
  const int per_row = bwd ? 4 : 2;
  FV x(*a.in[0]), dy = bwd ? FV(*a.dout[0]) : FV(), wq(*a.w), wk(*a.b);
  float* out = sums.as<float>();
  cpu::parallel_for(*pool_, a.M, row_grain(static_cast<int>(sp.width)), [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r) {
      float* s = out + per_row * r;
      int part = 0;
      for (const Span& g : {sp.q, sp.k}) {
        const std::int64_t base = g.at(r);
        const FV& w = part == 0 ? wq : wk;
        float sq = 0.0f, dot = 0.0f;
        for (int c = 0; c < g.H; ++c) {
          const float v = x[base + c];
          sq += v * v;
          if (bwd) dot += dy[base + c] * w[c] * v;
        }
        s[part] = sq;
        if (bwd) s[2 + part] = dot;
        ++part;
      }
    }
  });
}

void CpuBackend::qk_norm_split(Pass pass, const OpArgs& a, const Tensor& sums, int q_width, int k_width) {
  const char* op = pass == Pass::Forward ? "qk_norm_split_fwd" : "qk_norm_split_bwd";
  const QkSpans sp = qk_spans(a, op);
  check_split(pass, a, sums, sp, op);
  if (q_width < a.K || k_width < a.N)
    throw Error(std::string("cpu ") + op + ": whole widths " + std::to_string(q_width) + " and " +
                std::to_string(k_width) + " are below this rank's " + std::to_string(a.K) + " and " +
                std::to_string(a.N));
  const float* s = sums.as<float>();
  FV x(*a.in[0]);
  const std::int64_t v0 = a.K + a.N;
  if (pass == Pass::Forward) {
    FV y(*a.out[0]), wq(*a.w), wk(*a.b);
    cpu::parallel_for(*pool_, a.M, row_grain(static_cast<int>(sp.width)), [&](std::int64_t r0, std::int64_t r1, int) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const std::int64_t base = r * sp.width;
        const float rq = split_rstd(s[2 * r], q_width, a.eps), rk = split_rstd(s[2 * r + 1], k_width, a.eps);
        for (int c = 0; c < a.K; ++c) y.set(base + c, x[base + c] * rq * wq[c]);
        for (int c = 0; c < a.N; ++c) y.set(base + a.K + c, x[base + a.K + c] * rk * wk[c]);
        for (std::int64_t c = v0; c < sp.width; ++c) y.set(base + c, x[base + c]);
      }
    });
    return;
  }
  FV dy(*a.dout[0]), dx(*a.din[0]);
  const bool acc = a.acc[0];
  cpu::Arena arena(ws_, op);
  NormBwdWs ws(arena, a.M);
  int part = 0;
  for (const Span& g : {sp.q, sp.k}) {
    const FV w(part == 0 ? *a.w : *a.b);
    const int width = part == 0 ? q_width : k_width;
    const float inv = 1.0f / static_cast<float>(width);
    cpu::parallel_for(*pool_, a.M, row_grain(g.H), [&](std::int64_t r0, std::int64_t r1, int) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const std::int64_t base = g.at(r);
        const float rstd = split_rstd(s[4 * r + part], width, a.eps);
        ws.stats[2 * r] = 0.0f;
        ws.stats[2 * r + 1] = rstd;
        const float mgx = s[4 * r + 2 + part] * rstd * inv;
        for (int c = 0; c < g.H; ++c) {
          const float xhat = x[base + c] * rstd;
          dx.put(base + c, rstd * (dy[base + c] * w[c] - xhat * mgx), acc);
        }
      }
    });
    param_grads(*pool_, x, dy, ws.stats, FV(part == 0 ? *a.dw : *a.db), nullptr, g);
    ++part;
  }
  cpu::parallel_for(*pool_, a.M, row_grain(a.N), [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t c = v0; c < sp.width; ++c) dx.put(r * sp.width + c, dy[r * sp.width + c], acc);
  });
}

}  // namespace remat
