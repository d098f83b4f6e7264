// Device helpers shared by the kernel files (not a launcher header): bf16 conversion with the
// CPU backend's rounding, vector loads, warp and block reductions, Philox quads, and an
// element-wise launcher. Included by .cu files only.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "core/util/philox.h"
#include "kernels/launch.cuh"

namespace remat::kernels::detail {

using bf16 = std::uint16_t;  // storage of bfloat16: the upper half of an fp32

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(bf16 x) {
  return __uint_as_float(static_cast<std::uint32_t>(x) << 16);
}
__device__ __forceinline__ float to_f(std::uint8_t x) { return static_cast<float>(x); }

template <class T>
__device__ __forceinline__ T from_f(float f);
template <>
__device__ __forceinline__ float from_f<float>(float f) {
  return f;
}
// Round to nearest even, quiet NaN: bit-identical to remat::float_to_bf16.
template <>
__device__ __forceinline__ bf16 from_f<bf16>(float f) {
  std::uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16>(u >> 16);
}

// Two floats as a packed bf16 pair (low half = first), same rounding as from_f.
__device__ __forceinline__ std::uint32_t pack_bf16x2(float lo, float hi) {
  return static_cast<std::uint32_t>(from_f<bf16>(lo)) |
         (static_cast<std::uint32_t>(from_f<bf16>(hi)) << 16);
}

template <int V, class T>
struct alignas(sizeof(T) * V) VecT {
  T v[V];
};

// V consecutive elements from p (aligned to V * sizeof(T)) as floats.
template <int V, class T>
__device__ __forceinline__ void load_vec(const T* p, float (&f)[V]) {
  const VecT<V, T> t = *reinterpret_cast<const VecT<V, T>*>(p);
#pragma unroll
  for (int k = 0; k < V; ++k) f[k] = to_f(t.v[k]);
}

template <int V, class T>
__device__ __forceinline__ void store_vec(T* p, const float (&f)[V]) {
  VecT<V, T> t;
#pragma unroll
  for (int k = 0; k < V; ++k) t.v[k] = from_f<T>(f[k]);
  *reinterpret_cast<VecT<V, T>*>(p) = t;
}

// V mask bytes as 0/1 floats.
template <int V>
__device__ __forceinline__ void load_mask(const std::uint8_t* p, float (&f)[V]) {
  const VecT<V, std::uint8_t> t = *reinterpret_cast<const VecT<V, std::uint8_t>*>(p);
#pragma unroll
  for (int k = 0; k < V; ++k) f[k] = t.v[k] ? 1.0f : 0.0f;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum in double over a block of N threads (N a power of two, N = blockDim.x) in a fixed tree, so
// the bits repeat; thread 0 gets the result (the others a partial). part: N doubles of shared
// memory, not read by the caller until a __syncthreads after this returns.
template <int N>
__device__ __forceinline__ double block_sum_fixed(double v, double* part) {
  part[threadIdx.x] = v;
  __syncthreads();
  for (int w = N / 2; w > 0; w >>= 1) {
    if (static_cast<int>(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  return part[threadIdx.x];
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024) in a fixed order; every thread
// gets the result. red: 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // red may still be read by a previous call
  if (lane == 0) red[w] = v;
  __syncthreads();
  float r = lane < nw ? red[lane] : 0.0f;
  return warp_sum(r);
}

// Two sums at once (red: 64 floats).
__device__ __forceinline__ void block_sum2(float& a, float& b, float* red) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  a = warp_sum(a);
  b = warp_sum(b);
  __syncthreads();
  if (lane == 0) {
    red[w] = a;
    red[32 + w] = b;
  }
  __syncthreads();
  float ra = lane < nw ? red[lane] : 0.0f;
  float rb = lane < nw ? red[32 + lane] : 0.0f;
  a = warp_sum(ra);
  b = warp_sum(rb);
}

// The four Philox outputs of counter q: element 4q + j of the global mask keyed by `key` has
// bits r.v[j]; identical to philox_block(key, q).
__device__ __forceinline__ Philox4 philox_quad(const DropoutKey& key, std::uint64_t q) {
  Philox4 c;
  c.v[0] = static_cast<std::uint32_t>(q);
  c.v[1] = static_cast<std::uint32_t>(q >> 32);
  c.v[2] = key.step;
  c.v[3] = (key.block << 8) ^ key.site;
  return philox4x32(c, static_cast<std::uint32_t>(key.seed),
                    static_cast<std::uint32_t>(key.seed >> 32));
}

// Keep flags of elements idx and idx + 1 of the mask keyed by `key` (their places in the global
// mask by mask_position: a replica's offset, a tensor-parallel rank's runs of heads); one
// Philox call when both share a counter. The same bits as philox_bits.
__device__ __forceinline__ void keep_pair(const DropoutKey& key, std::uint64_t idx,
                                          std::uint32_t thr, bool& k0, bool& k1) {
  const std::uint64_t p0 = mask_position(key, idx), p1 = mask_position(key, idx + 1);
  const Philox4 r = philox_quad(key, p0 >> 2);
  k0 = r.v[p0 & 3u] >= thr;
  k1 = ((p1 >> 2) == (p0 >> 2) ? r : philox_quad(key, p1 >> 2)).v[p1 & 3u] >= thr;
}

__device__ __forceinline__ bool keep_one(const DropoutKey& key, std::uint64_t idx,
                                         std::uint32_t thr) {
  const std::uint64_t p = mask_position(key, idx);
  return philox_quad(key, p >> 2).v[p & 3u] >= thr;
}

// --- element-wise launcher: F::run<V>(i) handles elements [i, i + V). ---
template <int V, class F>
__global__ void __launch_bounds__(256) ew_kernel(F f, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t tid = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t nv = n / V;
  for (std::int64_t i = tid; i < nv; i += stride) f.template run<V>(i * V);
  if constexpr (V > 1) {
    for (std::int64_t i = nv * V + tid; i < n; i += stride) f.template run<1>(i);
  }
}

template <int V, class F>
void ew_launch(const F& f, std::int64_t n, cudaStream_t s, const char* name) {
  if (n <= 0) return;
  const std::int64_t work = (n + V - 1) / V;
  std::int64_t blocks = (work + 255) / 256;
  if (blocks > 8192) blocks = 8192;
  ew_kernel<V><<<static_cast<unsigned>(blocks), 256, 0, s>>>(f, n);
  check_launch(name);
}

// ew_launch with 16-byte vectors of T where every pointer is aligned (vec), one element at a time
// otherwise.
template <class T, class F>
void ew_launch_vec(const F& f, bool vec, std::int64_t n, cudaStream_t s, const char* name) {
  if (vec) ew_launch<16 / sizeof(T)>(f, n, s, name);
  else ew_launch<1>(f, n, s, name);
}

inline int ceil_div(std::int64_t a, std::int64_t b) { return static_cast<int>((a + b - 1) / b); }

}  // namespace remat::kernels::detail
