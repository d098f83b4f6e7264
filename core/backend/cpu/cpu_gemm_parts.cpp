#include "core/backend/cpu/cpu_gemm_parts.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

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

void widen(FV src, std::int64_t off, float* dst, std::int64_t n) {
  if (!src.bf) {
    std::memcpy(dst, static_cast<const float*>(src.p) + off, static_cast<std::size_t>(n) * 4);
    return;
  }
  const std::uint16_t* s = static_cast<const std::uint16_t*>(src.p) + off;
  for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
}

void widen_all(ThreadPool& pool, FV src, float* dst, std::int64_t n) {
  FV d;
  d.p = dst;
  copy_floats(pool, src, d, n, false);
}

void narrow(const float* src, FV dst, std::int64_t off, std::int64_t n, bool acc) {
  if (!dst.bf) {
    float* d = static_cast<float*>(dst.p) + off;
    if (acc)
      for (std::int64_t i = 0; i < n; ++i) d[i] += src[i];
    else
      std::memcpy(d, src, static_cast<std::size_t>(n) * 4);
    return;
  }
  std::uint16_t* d = static_cast<std::uint16_t*>(dst.p) + off;
  if (acc)
    for (std::int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(bf16_to_float(d[i]) + src[i]);
  else
    for (std::int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
}

void widen_cols(FV src, float* dst, std::int64_t rows, std::int64_t cols, std::int64_t c0,
                std::int64_t c1) {
  for (std::int64_t r = 0; r < rows; ++r) widen(src, r * cols + c0, dst + r * cols + c0, c1 - c0);
}

}  // namespace remat::cpu
