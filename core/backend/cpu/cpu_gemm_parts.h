// GEMMs split over the CPU backend's thread pool: each lane runs a single-threaded
// cblas_sgemm on its own slice of the output (OpenBLAS is kept at one thread, so the pool's
// lanes are the only threads doing work and nothing oversubscribes the cores). A slice is a
// range of whole 64-wide units of one output dimension, fixed by the shape and the lane count,
// and every output element is summed by one lane over the whole inner dimension, so the bits
// depend on the shapes and the thread count only. On the sgemm path bf16 operands are widened to
// fp32 slice by slice by the lane that uses them, right before its GEMM; on the dnnl path a lane
// runs oneDNN's bf16 matmul on them instead (cpu_dnnl.h).
#pragma once
#include <cstdint>

#include "core/backend/cpu/cpu_common.h"

namespace remat::cpu {

// Row-major C[M, N] = op(A) op(B) + beta C on the calling thread; op(A) is [M, K], op(B) [K, N].
void sgemm1(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
            const float* B, int ldb, float beta, float* C, int ldc);

// How one dimension of n elements is cut into `parts` slices of whole kUnit-wide units.
struct GemmSplit {
  static constexpr std::int64_t kUnit = 64;
  std::int64_t n = 0;
  int parts = 1;
  std::int64_t begin(int p) const;  // slice p is [begin(p), begin(p + 1))
};
// Up to `lanes` slices of a dimension of n elements for a GEMM of `flops`: one slice when the
// GEMM is too small to be worth a second lane.
GemmSplit gemm_split(std::int64_t n, double flops, int lanes);

// The lanes a GEMM may use: the pool's `n`, or (no pool, n = 1) the calling thread alone, as a
// lane of the pool does when it runs a whole GEMM of its own (the experts' groups, cpu_expert_gemm.cpp).
struct Lanes {
  ThreadPool* pool = nullptr;
  int n = 1;
};

// f(begin, end) for every slice of `s`, one slice a lane.
template <class F>
void for_slices(ThreadPool& pool, const GemmSplit& s, F&& f) {
  if (s.parts <= 1) {
    f(std::int64_t{0}, s.n);
    return;
  }
  parallel_for(pool, s.parts, 1, [&](std::int64_t p0, std::int64_t p1, int) {
    for (std::int64_t p = p0; p < p1; ++p)
      f(s.begin(static_cast<int>(p)), s.begin(static_cast<int>(p) + 1));
  });
}

// The same on `lanes`: inline on the calling thread without a pool.
template <class F>
void for_slices(const Lanes& lanes, const GemmSplit& s, F&& f) {
  if (!lanes.pool) {
    f(std::int64_t{0}, s.n);
    return;
  }
  for_slices(*lanes.pool, s, f);
}
template <class F>
void parallel_for(const Lanes& lanes, std::int64_t n, std::int64_t grain, F&& f) {
  if (!lanes.pool) {
    if (n > 0) f(std::int64_t{0}, n, 0);
    return;
  }
  parallel_for(*lanes.pool, n, grain, [&f](std::int64_t i0, std::int64_t i1, int lane) { f(i0, i1, lane); });
}

// dst[0, n) = src[off + i] as fp32 (a copy for fp32 sources); the SIMD copy kernel where one is
// active.
void widen(FV src, std::int64_t off, float* dst, std::int64_t n);
// The same over the pool, for operands every lane reads.
void widen_all(ThreadPool& pool, FV src, float* dst, std::int64_t n);
inline void widen_all(const Lanes& lanes, FV src, float* dst, std::int64_t n) {
  if (lanes.pool)
    widen_all(*lanes.pool, src, dst, n);
  else
    widen(src, 0, dst, n);
}
// dst[off + i] = round(src[i]), or round(dst[off + i] + src[i]) when acc.
void narrow(const float* src, FV dst, std::int64_t off, std::int64_t n, bool acc);
// Columns [c0, c1) of the [rows, cols] matrix src widened into the same place of dst.
void widen_cols(FV src, float* dst, std::int64_t rows, std::int64_t cols, std::int64_t c0,
                std::int64_t c1);

}  // namespace remat::cpu
