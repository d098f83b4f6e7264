// Row arithmetic of the softmax cross-entropy kernel, shared by the device code and the host
// tests (plain C++ outside nvcc): a running (max, sum of exponentials) pair that one pass over a
// row builds and that threads merge, and the split of a row between the threads of a block.
#pragma once
#include <cmath>

#include "core/util/bf16.h"  // REMAT_HD

namespace remat::kernels::detail {

// max m of the values seen and s = sum of exp(v - m) over them; the empty set is {-inf, 0}.
struct MaxSum {
  float m;
  float s;
};

REMAT_HD MaxSum maxsum_empty() { return {-INFINITY, 0.0f}; }

// Merge two partial pairs. Symmetric bit for bit (fmaxf, * and + commute; on the device the
// products are rounded on their own, never fused into a multiply-add with one side only), so a
// butterfly reduction gives every lane the same pair.
REMAT_HD MaxSum maxsum_merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return maxsum_empty();
#if defined(__CUDA_ARCH__)
  return {m, __fadd_rn(__fmul_rn(a.s, expf(a.m - m)), __fmul_rn(b.s, expf(b.m - m)))};
#else
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
#endif
}

// Add the N values at v: one rescale of the running sum per group, not per value.
template <int N>
REMAT_HD MaxSum maxsum_add(MaxSum a, const float* v) {
  float lm = v[0];
#pragma unroll
  for (int k = 1; k < N; ++k) lm = fmaxf(lm, v[k]);
  if (lm == -INFINITY) return a;  // nothing to add; keeps exp(-inf - -inf) out
  if (lm > a.m) {
    a.s *= expf(a.m - lm);
    a.m = lm;
  }
  float add = 0.0f;
#pragma unroll
  for (int k = 0; k < N; ++k) add += expf(v[k] - a.m);
  a.s += add;
  return a;
}

// The part of a row of V elements that thread `tid` of `nt` owns: groups of VEC consecutive
// elements [j, j + VEC) for j = VEC * (tid + k * nt), then, when VEC does not divide V, single
// elements of the tail in the same stride. load(j, f) fills float f[n] with elements
// [j, j + n); emit(j, f) consumes them (n = VEC, or 1 in the tail). U groups are loaded before
// the first is emitted, so U loads are in flight at once.
template <int VEC, int U, class Load, class Emit>
REMAT_HD void row_stride(int V, int tid, int nt, Load&& load, Emit&& emit) {
  const int nv = V / VEC;
  int i = tid;
  for (; i + (U - 1) * nt < nv; i += U * nt) {
    float f[U][VEC];
#pragma unroll
    for (int u = 0; u < U; ++u) load((i + u * nt) * VEC, f[u]);
#pragma unroll
    for (int u = 0; u < U; ++u) emit((i + u * nt) * VEC, f[u]);
  }
  for (; i < nv; i += nt) {
    float f[VEC];
    load(i * VEC, f);
    emit(i * VEC, f);
  }
  if (VEC > 1)
    for (int j = nv * VEC + tid; j < V; j += nt) {
      float f[1];
      load(j, f);
      emit(j, f);
    }
}

// The (max, sum) pair of the part of a row that row_stride<VEC, U> gives thread `tid` of `nt`.
template <int VEC, int U, class Load>
REMAT_HD MaxSum row_maxsum_partial(int V, int tid, int nt, Load&& load) {
  MaxSum acc = maxsum_empty();
  row_stride<VEC, U>(V, tid, nt, load, [&](int, auto& f) {
    acc = maxsum_add<sizeof(f) / sizeof(float)>(acc, f);
  });
  return acc;
}

}  // namespace remat::kernels::detail
