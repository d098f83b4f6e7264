// Linear layers and the fused head + loss: GEMMs through single-threaded calls on slices of the
// output, one a lane of the pool (cpu_gemm_parts.h): cblas_sgemm on fp32 operands (bf16 tensors
// widened to fp32 in the workspace), or, on the dnnl path, oneDNN's bf16 matmul on GEMMs whose two
// operands are bf16 (cpu_dnnl.h); bias and rounding in our own loops; the head's cross-entropy
// rows in cpu_cross_entropy.cpp.
#include <algorithm>
#include <climits>
#include <cmath>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"
#include "core/backend/cpu/cpu_cross_entropy.h"
#include "core/backend/cpu/cpu_dnnl.h"
#include "core/backend/cpu/cpu_gemm_parts.h"

namespace remat {

using cpu::FV;

namespace {

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

// Lb: a chunk's dlogits rounded to bf16, for the backward GEMMs on the dnnl path.
struct HeadWs {
  float *Ws = nullptr, *dWs = nullptr, *Xs = nullptr, *L = nullptr, *DX = nullptr;
  std::uint16_t* Lb = nullptr;
  HeadWs(cpu::Arena& a, std::int64_t rows, int H, int V, bool wbf, bool dwbf, bool xbf,
         bool dxbf) {
    std::int64_t ch = std::min<std::int64_t>(rows, cpu::kHeadRows);
    std::int64_t vh = static_cast<std::int64_t>(V) * H;
    if (wbf) Ws = a.take<float>(vh);
    if (dwbf) dWs = a.take<float>(vh);
    if (xbf) Xs = a.take<float>(ch * H);
    L = a.take<float>(ch * V);
    if (dxbf) DX = a.take<float>(ch * H);
    if (wbf && xbf) Lb = a.take<std::uint16_t>(ch * V);
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

const std::uint16_t* bits(const Tensor& t) { return static_cast<const std::uint16_t*>(t.data); }

// Whether a GEMM of operands a and b runs on oneDNN's bf16 matmul.
bool on_dnnl(const Tensor& a, const Tensor& b) {
  return a.dtype == DType::BF16 && b.dtype == DType::BF16 &&
         cpu::gemm_path() == cpu::GemmPath::Dnnl;
}

// The dnnl path splits a GEMM over the rows of its output where that gives as many slices as its
// columns would: whole rows are what oneDNN's kernel writes in place.
bool split_rows(std::int64_t M, std::int64_t cols, double flops, int lanes) {
  return cpu::gemm_split(M, flops, lanes).parts >= cpu::gemm_split(cols, flops, lanes).parts;
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

std::uint64_t CpuBackend::linear_ws(Pass pass, const Tensor& x, const Tensor& W, const Tensor& y_or_dy,
                                    const Tensor* dx, const Tensor* dW, std::int64_t M, int K, int N) const {
  cpu::Arena a;
  auto bf = [](const Tensor* t) { return t && *t && t->dtype == DType::BF16; };
  if (pass == Pass::Forward) {
    LinearFwdWs w(a, M, K, N, bf(&x), bf(&W), bf(&y_or_dy));
  } else {
    LinearBwdWs w(a, M, K, N, bf(&y_or_dy), bf(&x) || bf(dx), (dx && *dx && bf(&W)) || bf(dW));
  }
  return a.used();
}

void CpuBackend::linear_fwd(const Tensor& x, const Tensor& W, const Tensor* b, const Tensor& y,
                            std::int64_t M, int K, int N) {
  cpu::Arena arena(ws_, "linear_fwd");
  linear_fwd(cpu::Lanes{pool_.get(), threads_}, arena, x, W, b, y, M, K, N);
}

void CpuBackend::linear_fwd(const cpu::Lanes& lanes, cpu::Arena& arena, const Tensor& x, const Tensor& W,
                            const Tensor* b, const Tensor& y, std::int64_t M, int K, int N) {
  const char* op = "linear_fwd";
  cpu::ensure_blas_threads(1);
  check_gemm_dims(M, K, N, op);
  cpu::check_float(x, op, "x", M * K);
  cpu::check_float(W, op, "W", static_cast<std::int64_t>(N) * K);
  cpu::check_float(y, op, "y", M * N);
  const bool has_b = b && *b;
  if (has_b) cpu::check_float(*b, op, "b", N);
  const bool xbf = x.dtype == DType::BF16, wbf = W.dtype == DType::BF16,
             ybf = y.dtype == DType::BF16;
  LinearFwdWs w(arena, M, K, N, xbf, wbf, ybf);
  float* ys = ybf ? w.ys : y.as<float>();
  const FV Wv(W), bv = has_b ? FV(*b) : FV(), yv(y);
  const double flops = 2.0 * static_cast<double>(M) * K * N;
  // Bias and rounding of rows [r0, r1) and columns [n0, n1) of y.
  auto finish = [&](std::int64_t r0, std::int64_t r1, std::int64_t n0, std::int64_t n1) {
    if (!has_b && !ybf) return;
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t n = n0; n < n1; ++n) {
        float v = ys[r * N + n];
        if (has_b) v += bv[n];
        yv.set(r * N + n, v);
      }
  };
  if (on_dnnl(x, W)) {
    if (split_rows(M, N, flops, lanes.n)) {
      cpu::for_slices(lanes, cpu::gemm_split(M, flops, lanes.n), [&](std::int64_t r0, std::int64_t r1) {
        cpu::bgemm1(false, true, static_cast<int>(r1 - r0), N, K, bits(x) + r0 * K, K, bits(W), K,
                    0.0f, ys + r0 * N, N);
        finish(r0, r1, 0, N);
      });
      return;
    }
    cpu::for_slices(lanes, cpu::gemm_split(N, flops, lanes.n), [&](std::int64_t n0, std::int64_t n1) {
      cpu::bgemm1(false, true, static_cast<int>(M), static_cast<int>(n1 - n0), K, bits(x), K,
                  bits(W) + n0 * K, K, 0.0f, ys + n0, N);
      finish(0, M, n0, n1);
    });
    return;
  }
  const float* xs = f32_or_null(x);
  if (xbf) cpu::widen_all(lanes, FV(x), w.xs, M * K), xs = w.xs;
  // Each lane: its rows of W (widened), its columns of y, their bias and rounding.
  cpu::for_slices(lanes, cpu::gemm_split(N, flops, lanes.n), [&](std::int64_t n0, std::int64_t n1) {
    const int nn = static_cast<int>(n1 - n0);
    const float* Ws = wbf ? w.ws + n0 * K : static_cast<const float*>(W.data) + n0 * K;
    if (wbf) cpu::widen(Wv, n0 * K, w.ws + n0 * K, static_cast<std::int64_t>(nn) * K);
    cpu::sgemm1(false, true, static_cast<int>(M), nn, K, xs, K, Ws, K, 0.0f, ys + n0, N);
    finish(0, M, n0, n1);
  });
}

void CpuBackend::linear_bwd(const Tensor& x, const Tensor& W, const Tensor& dy, const Tensor* dx,
                            const Tensor& dW, const Tensor* db, std::int64_t M, int K, int N,
                            bool acc) {
  cpu::Arena arena(ws_, "linear_bwd");
  linear_bwd(cpu::Lanes{pool_.get(), threads_}, arena, x, W, dy, dx, dW, db, M, K, N, acc);
}

void CpuBackend::linear_bwd(const cpu::Lanes& lanes, cpu::Arena& arena, const Tensor& x, const Tensor& W,
                            const Tensor& dy, const Tensor* dx, const Tensor& dW, const Tensor* db, std::int64_t M,
                            int K, int N, bool acc) {
  const char* op = "linear_bwd";
  cpu::ensure_blas_threads(1);
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
  LinearBwdWs w(arena, M, K, N, dybf, xbf || dxbf, (has_dx && wbf) || dwbf);

  // dy widened to fp32 only for a GEMM on the sgemm path.
  const bool dw_dnnl = on_dnnl(dy, x), dx_dnnl = has_dx && on_dnnl(dy, W);
  const float* dys = f32_or_null(dy);
  if (dybf && (!dw_dnnl || (has_dx && !dx_dnnl))) cpu::widen_all(lanes, FV(dy), w.A, M * N), dys = w.A;

  if (has_db) {  // db += colsum(dy), summed over rows in order
    const FV dbv(*db), dyv(dy);
    std::int64_t blocks = (N + cpu::kColBlock - 1) / cpu::kColBlock;
    cpu::parallel_for(lanes, blocks, 1, [&](std::int64_t b0, std::int64_t b1, int) {
      for (std::int64_t blk = b0; blk < b1; ++blk) {
        const int c0 = static_cast<int>(blk) * cpu::kColBlock;
        const int nc = std::min(cpu::kColBlock, N - c0);
        float accum[cpu::kColBlock] = {};
        for (std::int64_t r = 0; r < M; ++r)
          for (int c = 0; c < nc; ++c) accum[c] += dyv[r * N + c0 + c];
        for (int c = 0; c < nc; ++c) dbv.set(c0 + c, dbv[c0 + c] + accum[c]);
      }
    });
  }

  // dW += dy^T x, a slice of dW's rows a lane. bf16 dW: the product in fp32, then one rounding
  // of dW + product.
  const float* xs = f32_or_null(x);
  if (xbf && !dw_dnnl) cpu::widen_all(lanes, FV(x), w.X, M * K), xs = w.X;
  const FV dWv(dW);
  const double flops = 2.0 * static_cast<double>(M) * K * N;
  cpu::for_slices(lanes, cpu::gemm_split(N, flops, lanes.n), [&](std::int64_t n0, std::int64_t n1) {
    const int nn = static_cast<int>(n1 - n0);
    float* C = dwbf ? w.Wb + n0 * K : dW.as<float>() + n0 * K;
    const float beta = dwbf ? 0.0f : 1.0f;
    if (dw_dnnl)
      cpu::bgemm1(true, false, nn, K, static_cast<int>(M), bits(dy) + n0, N, bits(x), K, beta, C, K);
    else
      cpu::sgemm1(true, false, nn, K, static_cast<int>(M), dys + n0, N, xs, K, beta, C, K);
    if (dwbf) cpu::narrow(C, dWv, n0 * K, static_cast<std::int64_t>(nn) * K, true);
  });

  // dx = dy W (acc: +=), a slice of dx's columns a lane (with those columns of W widened), or on
  // the dnnl path a slice of its rows where that splits as well.
  if (!has_dx) return;
  const FV Wv(W), dxv(*dx);
  float* dxc = dxbf ? w.X : dx->as<float>();
  const float dx_beta = !dxbf && acc ? 1.0f : 0.0f;
  if (dx_dnnl && split_rows(M, K, flops, lanes.n)) {
    cpu::for_slices(lanes, cpu::gemm_split(M, flops, lanes.n), [&](std::int64_t r0, std::int64_t r1) {
      cpu::bgemm1(false, false, static_cast<int>(r1 - r0), K, N, bits(dy) + r0 * N, N, bits(W), K,
                  dx_beta, dxc + r0 * K, K);
      if (dxbf) cpu::narrow(dxc + r0 * K, dxv, r0 * K, (r1 - r0) * K, acc);
    });
    return;
  }
  cpu::for_slices(lanes, cpu::gemm_split(K, flops, lanes.n), [&](std::int64_t k0, std::int64_t k1) {
    const int kk = static_cast<int>(k1 - k0);
    if (dx_dnnl) {
      cpu::bgemm1(false, false, static_cast<int>(M), kk, N, bits(dy), N, bits(W) + k0, K, dx_beta,
                  dxc + k0, K);
    } else {
      const float* Ws = wbf ? w.Wb : static_cast<const float*>(W.data);
      if (wbf) cpu::widen_cols(Wv, w.Wb, N, K, k0, k1);
      cpu::sgemm1(false, false, static_cast<int>(M), kk, N, dys, N, Ws + k0, K, dx_beta, dxc + k0, K);
    }
    if (dxbf)
      for (std::int64_t r = 0; r < M; ++r) cpu::narrow(dxc + r * K + k0, dxv, r * K + k0, kk, acc);
  });
}

void CpuBackend::head_loss(const Tensor& x, const Tensor& W, const Tensor& targets,
                           const Tensor& losses, const Tensor& dx, const Tensor& dW,
                           std::int64_t rows, int H, int V, float scale, float softcap,
                           float logit_mult) {
  const char* op = "head_loss";
  cpu::ensure_blas_threads(1);
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
  if (!(logit_mult > 0.0f) || !std::isfinite(logit_mult))
    throw Error("cpu head_loss: the logits' multiplier must be positive, got " + std::to_string(logit_mult));
  const std::int32_t* tg = targets.as<const std::int32_t>();
  for (std::int64_t r = 0; r < rows; ++r)
    if (tg[r] < 0 || tg[r] >= V)
      throw Error("cpu head_loss: target " + std::to_string(tg[r]) + " at row " +
                  std::to_string(r) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
  const bool xbf = x.dtype == DType::BF16, wbf = W.dtype == DType::BF16,
             dxbf = dx.dtype == DType::BF16, dwbf = dW.dtype == DType::BF16;
  cpu::Arena arena(ws_, op);
  HeadWs w(arena, rows, H, V, wbf, dwbf, xbf, dxbf);

  // On the dnnl path every GEMM of the head reads bf16 x and W as they are, and the backward
  // ones a chunk's dlogits rounded to bf16 (as a bf16 model's logits gradient is).
  const bool head_dnnl = on_dnnl(x, W);
  const float* Ws = f32_or_null(W);
  if (wbf && !head_dnnl) cpu::widen_all(*pool_, FV(W), w.Ws, VH), Ws = w.Ws;
  // bf16 dW: the chunks' products summed in fp32 (the first overwrites), dW rounded once at the
  // end with what it held before.
  float* dWs = dwbf ? w.dWs : dW.as<float>();
  float* loss = losses.as<float>();
  FV xv(x), dxv(dx);

  for (std::int64_t r0 = 0; r0 < rows; r0 += cpu::kHeadRows) {
    const int c = static_cast<int>(std::min<std::int64_t>(cpu::kHeadRows, rows - r0));
    const float* xs = xbf ? w.Xs : x.as<const float>() + r0 * H;
    if (xbf && !head_dnnl) cpu::widen(xv, r0 * H, w.Xs, static_cast<std::int64_t>(c) * H);
    const std::uint16_t* xb = head_dnnl ? bits(x) + r0 * H : nullptr;
    float* L = w.L;
    const double flops = 2.0 * c * H * static_cast<double>(V);
    const auto by_vocab = cpu::gemm_split(V, flops, threads_);
    cpu::for_slices(*pool_, by_vocab, [&](std::int64_t v0, std::int64_t v1) {
      if (head_dnnl)
        cpu::bgemm1(false, true, c, static_cast<int>(v1 - v0), H, xb, H, bits(W) + v0 * H, H,
                    0.0f, L + v0, V);
      else
        cpu::sgemm1(false, true, c, static_cast<int>(v1 - v0), H, xs, H, Ws + v0 * H, H, 0.0f,
                    L + v0, V);
    });
    // Per row: loss = logsumexp - logit[target]; the row becomes dlogits (cpu_cross_entropy.h).
    cpu::parallel_for(*pool_, c, 4, [&](std::int64_t i0, std::int64_t i1, int) {
      for (std::int64_t i = i0; i < i1; ++i) {
        float* row = L + i * V;
        if (logit_mult != 1.0f)
          for (int v = 0; v < V; ++v) row[v] *= logit_mult;
        // d loss / d (x W^T) is logit_mult times d loss / d logits.
        loss[r0 + i] = cpu::cross_entropy_row(row, V, tg[r0 + i], scale * logit_mult, softcap);
      }
    });
    float* dxs = dxbf ? w.DX : dx.as<float>() + r0 * H;
    const float beta = dwbf && r0 == 0 ? 0.0f : 1.0f;
    if (head_dnnl) {
      FV lb;
      lb.p = w.Lb, lb.bf = true;
      FV lf;
      lf.p = L;
      cpu::copy_floats(*pool_, lf, lb, static_cast<std::int64_t>(c) * V, false);
      // dx = dlogits W (overwritten), a slice of its rows a lane; dW += dlogits^T x by vocabulary
      cpu::for_slices(*pool_, cpu::gemm_split(c, flops, threads_), [&](std::int64_t i0, std::int64_t i1) {
        const int ni = static_cast<int>(i1 - i0);
        cpu::bgemm1(false, false, ni, H, V, w.Lb + i0 * V, V, bits(W), H, 0.0f, dxs + i0 * H, H);
        if (dxbf) cpu::narrow(dxs + i0 * H, dxv, (r0 + i0) * H, static_cast<std::int64_t>(ni) * H, false);
      });
      cpu::for_slices(*pool_, by_vocab, [&](std::int64_t v0, std::int64_t v1) {
        cpu::bgemm1(true, false, static_cast<int>(v1 - v0), H, c, w.Lb + v0, V, xb, H, beta,
                    dWs + v0 * H, H);
      });
      continue;
    }
    // dx = dlogits W (overwritten), a slice of its columns a lane
    cpu::for_slices(*pool_, cpu::gemm_split(H, flops, threads_), [&](std::int64_t h0, std::int64_t h1) {
      const int hh = static_cast<int>(h1 - h0);
      cpu::sgemm1(false, false, c, hh, V, L, V, Ws + h0, H, 0.0f, dxs + h0, H);
      if (dxbf)
        for (int r = 0; r < c; ++r) cpu::narrow(dxs + r * H + h0, dxv, (r0 + r) * H + h0, hh, false);
    });
    // dW += dlogits^T x, a slice of its rows a lane
    cpu::for_slices(*pool_, by_vocab, [&](std::int64_t v0, std::int64_t v1) {
      cpu::sgemm1(true, false, static_cast<int>(v1 - v0), H, c, L + v0, V, xs, H, beta,
                  dWs + v0 * H, H);
    });
  }
  if (dwbf) {
    const FV dWv(dW);
    cpu::parallel_for(*pool_, VH, 1 << 15, [&](std::int64_t b, std::int64_t e, int) {
      cpu::narrow(w.dWs + b, dWv, b, e - b, true);
    });
  }
}

}  // namespace remat

namespace remat {

void CpuBackend::fwd_Linear(const OpArgs& a) { linear_fwd(*a.in[0], *a.w, a.b, *a.out[0], a.M, a.K, a.N); }
void CpuBackend::bwd_Linear(const OpArgs& a) {
  linear_bwd(*a.in[0], *a.w, *a.dout[0], a.din[0], *a.dw, a.db, a.M, a.K, a.N, a.acc[0]);
}

}  // namespace remat
