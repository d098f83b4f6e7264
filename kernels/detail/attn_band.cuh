// The mask and score map every attention kernel shares (naive and flash), as the CPU backend
// defines them (AttnDims, core/graph/op_table.h):
// - band: query i sees keys first_key(i) <= j <= i, first_key(i) = i - window + 1 when
//   window > 0 and i >= window, else 0 (window keys including itself); window 0 is plain causal.
//   Callers pass window 0 when window >= S (the same mask).
// - soft cap: raw = (q . k) * scale; with softcap > 0, t = tanhf(raw / softcap) and the score is
//   t * softcap; the gradient with respect to raw is the score's times (1 - t * t).
// Device-only header (.cu files).
#pragma once
#include <cmath>

#include <cuda_runtime.h>

namespace remat::kernels::detail {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// First key query i sees.
__host__ __device__ __forceinline__ int band_first_key(int window, int i) {
  return window > 0 && i >= window ? i - window + 1 : 0;
}

// Last query (below S) that sees key j.
__host__ __device__ __forceinline__ int band_last_query(int window, int j, int S) {
  const int last = window > 0 ? j + window - 1 : S - 1;
  return last < S - 1 ? last : S - 1;
}

// Whether query i sees key j.
__device__ __forceinline__ bool in_band(int window, int i, int j) {
  return j <= i && (window == 0 || i - j < window);
}

// t = tanhf(raw / cap) (cap > 0).
__device__ __forceinline__ float cap_tanh(float raw, float cap) { return tanhf(raw / cap); }

// The score of a raw (scaled) product: t * cap soft-capped, raw itself when cap is 0.
__device__ __forceinline__ float capped_score(float raw, float cap) {
  return cap > 0.0f ? cap_tanh(raw, cap) * cap : raw;
}

}  // namespace remat::kernels::detail
