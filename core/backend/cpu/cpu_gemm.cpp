// Linear layers and the fused head + loss: GEMMs through cblas_sgemm on fp32 operands (bf16
// tensors are staged to fp32 in the workspace), bias and rounding in our own loops.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"
#include "core/util/fork_guard.h"

namespace remat {

using cpu::FV;

namespace {

// cblas_sgemm, never while a plugin child process is being forked (core/util/fork_guard.h).
void sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
           const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  std::shared_lock lock(fork_guard());
  cblas_sgemm(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

struct LinearFwdWs {
  float *xs = nullptr, *ws = nullptr, *ys = nullptr;
  LinearFwdWs(cpu::Arena& a, std::int64_t M, int K, int N, bool xbf, bool wbf, bool ybf) {
    if (xbf) xs = a.take<float>(M * K);
    if (wbf) ws = a.take<float>(static_cast<std::int64_t>(N) * K);
    if (ybf) ys = a.take<float>(M * N);
  }
};

// A: dy; X: x, later dx; Wb: dW staging, later W.
struct LinearBwdWs {
  float *A = nullptr, *X = nullptr, *Wb = nullptr;
  LinearBwdWs(cpu::Arena& a, std::int64_t M, int K, int N, bool dybf, bool xslot, bool wslot) {
    if (dybf) A = a.take<float>(M * N);
    if (xslot) X = a.take<float>(M * K);
    if (wslot) Wb = a.take<float>(static_cast<std::int64_t>(N) * K);
  }
};

struct HeadWs {
  float *Ws = nullptr, *dWs = nullptr, *Xs = nullptr, *L = nullptr, *DX = nullptr;
  HeadWs(cpu::Arena& a, std::int64_t rows, int H, int V, bool wbf, bool dwbf, bool xbf,
         bool dxbf) {
    std::int64_t ch = std::min<std::int64_t>(rows, cpu::kHeadRows);
    std::int64_t vh = static_cast<std::int64_t>(V) * H;
    if (wbf) Ws = a.take<float>(vh);
    if (dwbf) dWs = a.take<float>(vh);
    if (xbf) Xs = a.take<float>(ch * H);
    L = a.take<float>(ch * V);
    if (dxbf) DX = a.take<float>(ch * H);
  }
};

void check_gemm_dims(std::int64_t M, int K, int N, const char* op) {
  if (M <= 0 || K <= 0 || N <= 0 || M > INT_MAX)
    throw Error(std::string("cpu ") + op + ": bad GEMM dims M=" + std::to_string(M) +
                " K=" + std::to_string(K) + " N=" + std::to_string(N));
}

const float* f32_or_null(const Tensor& t) {
  return t.dtype == DType::F32 ? static_cast<const float*>(t.data) : nullptr;
}

}  // namespace

std::uint64_t CpuBackend::ws_linear_fwd(std::int64_t M, int K, int N, bool bf16) const {
  cpu::Arena a;
  LinearFwdWs w(a, M, K, N, bf16, bf16, bf16);
  return a.used();
}

std::uint64_t CpuBackend::ws_linear_bwd(std::int64_t M, int K, int N, bool bf16) const {
  cpu::Arena a;
  LinearBwdWs w(a, M, K, N, bf16, bf16, bf16);
  return a.used();
}

std::uint64_t CpuBackend::ws_head_loss(std::int64_t rows, int H, int V, bool bf16) const {
  cpu::Arena a;
  HeadWs w(a, rows, H, V, bf16, bf16, bf16, bf16);
  return a.used();
}

void CpuBackend::linear_fwd(const Tensor& x, const Tensor& W, const Tensor* b, const Tensor& y,
                            std::int64_t M, int K, int N) {
  const char* op = "linear_fwd";
  cpu::ensure_blas_threads(threads_);
  check_gemm_dims(M, K, N, op);
  cpu::check_float(x, op, "x", M * K);
  cpu::check_float(W, op, "W", static_cast<std::int64_t>(N) * K);
  cpu::check_float(y, op, "y", M * N);
  const bool has_b = b && *b;
  if (has_b) cpu::check_float(*b, op, "b", N);
  cpu::Arena arena(ws_, op);
  const bool xbf = x.dtype == DType::BF16, wbf = W.dtype == DType::BF16,
             ybf = y.dtype == DType::BF16;
  LinearFwdWs w(arena, M, K, N, xbf, wbf, ybf);
  const float* xs = f32_or_null(x);
  const float* Ws = f32_or_null(W);
  if (xbf) cpu::to_f32(*pool_, FV(x), w.xs, M * K), xs = w.xs;
  if (wbf) cpu::to_f32(*pool_, FV(W), w.ws, static_cast<std::int64_t>(N) * K), Ws = w.ws;
  float* ys = ybf ? w.ys : y.as<float>();
  sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(M), N, K, 1.0f, xs, K,
              Ws, K, 0.0f, ys, N);
  if (!has_b && !ybf) return;
  FV bv = has_b ? FV(*b) : FV(), yv(y);
  cpu::parallel_for(*pool_, M, std::max<std::int64_t>(1, 16384 / N),
                    [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r)
      for (int n = 0; n < N; ++n) {
        float v = ys[r * N + n];
        if (has_b) v += bv[n];
        yv.set(r * N + n, v);
      }
  });
}

void CpuBackend::linear_bwd(const Tensor& x, const Tensor& W, const Tensor& dy, const Tensor* dx,
                            const Tensor& dW, const Tensor* db, std::int64_t M, int K, int N,
                            bool acc) {
  const char* op = "linear_bwd";
  cpu::ensure_blas_threads(threads_);
  check_gemm_dims(M, K, N, op);
  const std::int64_t NK = static_cast<std::int64_t>(N) * K;
  cpu::check_float(x, op, "x", M * K);
  cpu::check_float(W, op, "W", NK);
  cpu::check_float(dy, op, "dy", M * N);
  cpu::check_float(dW, op, "dW", NK);
  const bool has_dx = dx && *dx, has_db = db && *db;
  if (has_dx) cpu::check_float(*dx, op, "dx", M * K);
  if (has_db) cpu::check_float(*db, op, "db", N);
  const bool dybf = dy.dtype == DType::BF16, xbf = x.dtype == DType::BF16,
             wbf = W.dtype == DType::BF16, dwbf = dW.dtype == DType::BF16,
             dxbf = has_dx && dx->dtype == DType::BF16;
  cpu::Arena arena(ws_, op);
  LinearBwdWs w(arena, M, K, N, dybf, xbf || dxbf, (has_dx && wbf) || dwbf);

  const float* dys = f32_or_null(dy);
  if (dybf) cpu::to_f32(*pool_, FV(dy), w.A, M * N), dys = w.A;

  if (has_db) {  // db += colsum(dy), summed over rows in order
    FV dbv(*db);
    std::int64_t blocks = (N + cpu::kColBlock - 1) / cpu::kColBlock;
    cpu::parallel_for(*pool_, blocks, 1, [&](std::int64_t b0, std::int64_t b1, int) {
      for (std::int64_t blk = b0; blk < b1; ++blk) {
        const int c0 = static_cast<int>(blk) * cpu::kColBlock;
        const int nc = std::min(cpu::kColBlock, N - c0);
        float accum[cpu::kColBlock] = {};
        for (std::int64_t r = 0; r < M; ++r)
          for (int c = 0; c < nc; ++c) accum[c] += dys[r * N + c0 + c];
        for (int c = 0; c < nc; ++c) dbv.set(c0 + c, dbv[c0 + c] + accum[c]);
      }
    });
  }

  // dW += dy^T x
  const float* xs = f32_or_null(x);
  if (xbf) cpu::to_f32(*pool_, FV(x), w.X, M * K), xs = w.X;
  if (dwbf) {
    cpu::to_f32(*pool_, FV(dW), w.Wb, NK);
    sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, static_cast<int>(M), 1.0f, dys, N,
                xs, K, 1.0f, w.Wb, K);
    cpu::from_f32(*pool_, w.Wb, FV(dW), NK, false);
  } else {
    sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, static_cast<int>(M), 1.0f, dys, N,
                xs, K, 1.0f, dW.as<float>(), K);
  }

  // dx = dy W (acc: +=)
  if (!has_dx) return;
  const float* Ws = f32_or_null(W);
  if (wbf) cpu::to_f32(*pool_, FV(W), w.Wb, NK), Ws = w.Wb;
  if (dxbf) {
    sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(M), K, N, 1.0f, dys,
                N, Ws, K, 0.0f, w.X, K);
    cpu::from_f32(*pool_, w.X, FV(*dx), M * K, acc);
  } else {
    sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(M), K, N, 1.0f, dys,
                N, Ws, K, acc ? 1.0f : 0.0f, dx->as<float>(), K);
  }
}

namespace {

// One row of soft-capped logits: raw logits in, dlogits (with respect to the raw ones) out.
void soft_capped_row(float* l, int V, float cap, int target, float scale, float& loss) {
  cpu::tanh_of_quotient(l, V, cap);
  float mx = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < V; ++j) mx = std::max(mx, l[j] * cap);
  float sum = 0.0f;
  for (int j = 0; j < V; ++j) sum += std::exp(l[j] * cap - mx);
  loss = mx + std::log(sum) - l[target] * cap;
  const float inv = 1.0f / sum;
  for (int j = 0; j < V; ++j) {
    const float prob = std::exp(l[j] * cap - mx) * inv;
    l[j] = (j == target ? prob - 1.0f : prob) * scale * (1.0f - l[j] * l[j]);
  }
}

}  // namespace

void CpuBackend::head_loss(const Tensor& x, const Tensor& W, const Tensor& targets,
                           const Tensor& losses, const Tensor& dx, const Tensor& dW,
                           std::int64_t rows, int H, int V, float scale, float softcap) {
  const char* op = "head_loss";
  cpu::ensure_blas_threads(threads_);
  check_gemm_dims(rows, H, V, op);
  const std::int64_t VH = static_cast<std::int64_t>(V) * H;
  cpu::check_float(x, op, "x", rows * H);
  cpu::check_float(W, op, "W", VH);
  cpu::check_dtype(targets, DType::I32, op, "targets", rows);
  cpu::check_dtype(losses, DType::F32, op, "losses", rows);
  cpu::check_float(dx, op, "dx", rows * H);
  cpu::check_float(dW, op, "dW", VH);
  if (!(softcap >= 0.0f) || !std::isfinite(softcap))
    throw Error("cpu head_loss: softcap must be 0 (none) or positive, got " + std::to_string(softcap));
  const std::int32_t* tg = targets.as<const std::int32_t>();
  for (std::int64_t r = 0; r < rows; ++r)
    if (tg[r] < 0 || tg[r] >= V)
      throw Error("cpu head_loss: target " + std::to_string(tg[r]) + " at row " +
                  std::to_string(r) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
  const bool xbf = x.dtype == DType::BF16, wbf = W.dtype == DType::BF16,
             dxbf = dx.dtype == DType::BF16, dwbf = dW.dtype == DType::BF16;
  cpu::Arena arena(ws_, op);
  HeadWs w(arena, rows, H, V, wbf, dwbf, xbf, dxbf);

  const float* Ws = f32_or_null(W);
  if (wbf) cpu::to_f32(*pool_, FV(W), w.Ws, VH), Ws = w.Ws;
  float* dWs = dwbf ? w.dWs : dW.as<float>();
  if (dwbf) cpu::to_f32(*pool_, FV(dW), w.dWs, VH);
  float* loss = losses.as<float>();
  FV xv(x), dxv(dx);

  for (std::int64_t r0 = 0; r0 < rows; r0 += cpu::kHeadRows) {
    const int c = static_cast<int>(std::min<std::int64_t>(cpu::kHeadRows, rows - r0));
    const float* xs = xbf ? w.Xs : x.as<const float>() + r0 * H;
    if (xbf) cpu::to_f32(*pool_, xv.offset(r0 * H), w.Xs, static_cast<std::int64_t>(c) * H);
    float* L = w.L;
    sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c, V, H, 1.0f, xs, H, Ws, H, 0.0f, L,
                V);
    // Per row: loss = logsumexp - logit[target]; the row becomes dlogits. Soft-capped: the row
    // holds t = tanh(raw / cap), the logit is t * cap, and d logit / d raw = 1 - t^2.
    cpu::parallel_for(*pool_, c, 4, [&](std::int64_t i0, std::int64_t i1, int) {
      for (std::int64_t i = i0; i < i1; ++i) {
        float* l = L + i * V;
        if (softcap > 0.0f) {
          soft_capped_row(l, V, softcap, tg[r0 + i], scale, loss[r0 + i]);
          continue;
        }
        float mx = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < V; ++j) mx = std::max(mx, l[j]);
        float sum = 0.0f;
        for (int j = 0; j < V; ++j) sum += std::exp(l[j] - mx);
        const float lse = mx + std::log(sum);
        const int t = tg[r0 + i];
        loss[r0 + i] = lse - l[t];
        const float inv = 1.0f / sum;
        for (int j = 0; j < V; ++j) {
          const float prob = std::exp(l[j] - mx) * inv;
          l[j] = (j == t ? prob - 1.0f : prob) * scale;
        }
      }
    });
    // dx = dlogits W (overwritten)
    float* dxs = dxbf ? w.DX : dx.as<float>() + r0 * H;
    sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c, H, V, 1.0f, L, V, Ws, H, 0.0f, dxs,
                H);
    if (dxbf) cpu::from_f32(*pool_, w.DX, dxv.offset(r0 * H), static_cast<std::int64_t>(c) * H,
                            false);
    // dW += dlogits^T x
    sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, H, c, 1.0f, L, V, xs, H, 1.0f, dWs,
                H);
  }
  if (dwbf) cpu::from_f32(*pool_, w.dWs, FV(dW), VH, false);
}

}  // namespace remat

namespace remat {

void CpuBackend::fwd_Linear(const OpArgs& a) { linear_fwd(*a.in[0], *a.w, a.b, *a.out[0], a.M, a.K, a.N); }
void CpuBackend::bwd_Linear(const OpArgs& a) {
  linear_bwd(*a.in[0], *a.w, *a.dout[0], a.din[0], *a.dw, a.db, a.M, a.K, a.N, a.acc[0]);
}

}  // namespace remat
