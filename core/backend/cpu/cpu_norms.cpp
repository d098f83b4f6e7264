// LayerNorm (biased variance, as PyTorch) and RMSNorm over rows of width H. Backward recomputes
// the row statistics from x; parameter gradients are column sums over rows taken in row order.
#include <algorithm>
#include <cmath>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"

namespace remat {

using cpu::FV;

namespace {

struct NormBwdWs {
  float* stats = nullptr;  // per row: mean, rstd (rmsnorm: 0, rstd)
  NormBwdWs(cpu::Arena& a, std::int64_t rows) { stats = a.take<float>(2 * rows); }
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
                 std::int64_t rows, int H) {
  std::int64_t blocks = (H + cpu::kColBlock - 1) / cpu::kColBlock;
  cpu::parallel_for(pool, blocks, 1, [&](std::int64_t b0, std::int64_t b1, int) {
    for (std::int64_t blk = b0; blk < b1; ++blk) {
      const int c0 = static_cast<int>(blk) * cpu::kColBlock;
      const int nc = std::min(cpu::kColBlock, H - c0);
      float aw[cpu::kColBlock] = {}, ab[cpu::kColBlock] = {};
      for (std::int64_t r = 0; r < rows; ++r) {
        const float mean = stats[2 * r], rstd = stats[2 * r + 1];
        const std::int64_t base = r * H + c0;
        for (int c = 0; c < nc; ++c) {
          const float g = dy[base + c];
          aw[c] += g * ((x[base + c] - mean) * rstd);
          ab[c] += g;
        }
      }
      for (int c = 0; c < nc; ++c) {
        dw.set(c0 + c, dw[c0 + c] + aw[c]);
        if (db) db->set(c0 + c, (*db)[c0 + c] + ab[c]);
      }
    }
  });
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
  cpu::parallel_for(*pool_, rows, row_grain(H), [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t base = r * H;
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
  cpu::parallel_for(*pool_, rows, row_grain(H), [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t base = r * H;
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
  param_grads(*pool_, xv, dyv, stats, FV(dw), has_db ? &dbv : nullptr, rows, H);
}

void CpuBackend::rmsnorm_fwd(const Tensor& x, const Tensor& w, const Tensor& y,
                             std::int64_t rows, int H, float eps) {
  const char* op = "rmsnorm_fwd";
  check_width(rows, H, op);
  cpu::check_float(x, op, "x", rows * H);
  cpu::check_float(w, op, "w", H);
  cpu::check_float(y, op, "y", rows * H);
  FV xv(x), wv(w), yv(y);
  cpu::parallel_for(*pool_, rows, row_grain(H), [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t base = r * H;
      const float rstd = rms_rstd(xv, base, H, eps);
      for (int c = 0; c < H; ++c) yv.set(base + c, xv[base + c] * rstd * wv[c]);
    }
  });
}

void CpuBackend::rmsnorm_bwd(const Tensor& x, const Tensor& w, const Tensor& dy,
                             const Tensor& dx, const Tensor& dw, std::int64_t rows, int H,
                             float eps, bool acc) {
  const char* op = "rmsnorm_bwd";
  check_width(rows, H, op);
  cpu::check_float(x, op, "x", rows * H);
  cpu::check_float(w, op, "w", H);
  cpu::check_float(dy, op, "dy", rows * H);
  cpu::check_float(dx, op, "dx", rows * H);
  cpu::check_float(dw, op, "dw", H);
  cpu::Arena arena(ws_, op);
  NormBwdWs ws(arena, rows);
  FV xv(x), wv(w), dyv(dy), dxv(dx);
  float* stats = ws.stats;
  const float invH = 1.0f / static_cast<float>(H);
  cpu::parallel_for(*pool_, rows, row_grain(H), [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t base = r * H;
      const float rstd = rms_rstd(xv, base, H, eps);
      stats[2 * r] = 0.0f;
      stats[2 * r + 1] = rstd;
      float sgx = 0.0f;
      for (int c = 0; c < H; ++c) sgx += dyv[base + c] * wv[c] * (xv[base + c] * rstd);
      const float mgx = sgx * invH;
      for (int c = 0; c < H; ++c) {
        const float xhat = xv[base + c] * rstd;
        dxv.put(base + c, rstd * (dyv[base + c] * wv[c] - xhat * mgx), acc);
      }
    }
  });
  param_grads(*pool_, xv, dyv, stats, FV(dw), nullptr, rows, H);
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
  no_offset(a, "rmsnorm_fwd");
  rmsnorm_fwd(*a.in[0], *a.w, *a.out[0], a.M, a.K, a.eps);
}
void CpuBackend::bwd_RmsNorm(const OpArgs& a) {
  rmsnorm_bwd(*a.in[0], *a.w, *a.dout[0], *a.din[0], *a.dw, a.M, a.K, a.eps, a.acc[0]);
}

}  // namespace remat
