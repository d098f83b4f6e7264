#include "core/backend/cpu/cpu_gemm_parts.h"

#include <cblas.h>

#include <algorithm>

#include "core/util/fork_guard.h"

namespace remat::cpu {

namespace {

// Below this a GEMM runs on one lane: the hand-off would cost more than the second lane gains.
constexpr double kMinSplitFlops = 4e6;

}  // namespace

void sgemm1(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
            const float* B, int ldb, float beta, float* C, int ldc) {
  std::shared_lock lock(fork_guard());  // never while a plugin child is forked (fork_guard.h)
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

std::int64_t GemmSplit::begin(int p) const {
  const std::int64_t units = (n + kUnit - 1) / kUnit;
  return std::min(n, units * p / parts * kUnit);
}

GemmSplit gemm_split(std::int64_t n, double flops, int lanes) {
  GemmSplit s;
  s.n = n;
  const std::int64_t units = (n + GemmSplit::kUnit - 1) / GemmSplit::kUnit;
  if (flops >= kMinSplitFlops) s.parts = static_cast<int>(std::min<std::int64_t>(lanes, units));
  s.parts = std::max(1, s.parts);
  return s;
}

namespace {

// dst[i] = src[i] (or dst[i] + src[i] when acc) for i in [0, n), on the calling thread.
void copy_span(FV src, FV dst, std::int64_t n, bool acc) {
  if (const simd::Kernels* k = simd::active()) return k->copy(src.ref(), dst.ref(), 0, n, acc);
  for (std::int64_t i = 0; i < n; ++i) dst.put(i, src[i], acc);
}

FV f32(const float* p) {
  FV v;
  v.p = const_cast<float*>(p);
  return v;
}

}  // namespace

void widen(FV src, std::int64_t off, float* dst, std::int64_t n) {
  copy_span(src.offset(off), f32(dst), n, false);
}

void widen_all(ThreadPool& pool, FV src, float* dst, std::int64_t n) {
  copy_floats(pool, src, f32(dst), n, false);
}

void narrow(const float* src, FV dst, std::int64_t off, std::int64_t n, bool acc) {
  copy_span(f32(src), dst.offset(off), n, acc);
}

void widen_cols(FV src, float* dst, std::int64_t rows, std::int64_t cols, std::int64_t c0,
                std::int64_t c1) {
  for (std::int64_t r = 0; r < rows; ++r) widen(src, r * cols + c0, dst + r * cols + c0, c1 - c0);
}

}  // namespace remat::cpu
