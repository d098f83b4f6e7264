#include "kernels/attn_softmax.cuh"

#include "kernels/detail/attn_band.h"
#include "kernels/detail/device_utils.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

template <class T>
__global__ void __launch_bounds__(256)
    softmax_fwd_kernel(const float* __restrict__ sc, T* __restrict__ probs, int B, int S,
                       int heads, int h, int window, float cap, const T* __restrict__ sinks) {
  const int lane = threadIdx.x & 31;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (row >= static_cast<std::int64_t>(B) * S) return;
  const std::int64_t b = row / S;
  const int i = static_cast<int>(row % S);
  const int j0 = band_first_key(window, i);
  const float* src = sc + row * S;
  T* dst = probs + ((b * heads + h) * S + i) * static_cast<std::int64_t>(S);
  float mx = -INFINITY;
  for (int j = j0 + lane; j <= i; j += 32) mx = fmaxf(mx, capped_score(src[j], cap));
  mx = warp_max(mx);
  const float sink = sinks ? to_f(sinks[h]) : 0.0f;
  if (sinks) mx = fmaxf(mx, sink);
  float sum = 0.0f;
  for (int j = j0 + lane; j <= i; j += 32) sum += expf(capped_score(src[j], cap) - mx);
  sum = warp_sum(sum);
  if (sinks) sum += expf(sink - mx);
  for (int j = lane; j < S; j += 32)
    dst[j] = from_f<T>(j >= j0 && j <= i ? expf(capped_score(src[j], cap) - mx) / sum : 0.0f);
}

// One warp per row; lanes take VEC consecutive elements at a time (VEC > 1 needs S % VEC == 0
// and aligned rows). Outside the band nothing is read and zeros are written. sc (soft-capped
// scores only, else null): the raw scores [B, S, S] in fp32, for the factor 1 - t^2.
template <int VEC, class T>
__global__ void __launch_bounds__(256)
    softmax_bwd_kernel(const T* __restrict__ probs, const T* __restrict__ dprobs,
                       const float* __restrict__ sc, T* __restrict__ ds, int B, int S, int heads,
                       int h, int window, float cap) {
  const int lane = threadIdx.x & 31;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (row >= static_cast<std::int64_t>(B) * S) return;
  const std::int64_t b = row / S;
  const int i = static_cast<int>(row % S);
  const int j0 = band_first_key(window, i);
  const int v0 = j0 / VEC * VEC;  // the first group that holds a band entry
  const std::int64_t pr = ((b * heads + h) * S + i) * static_cast<std::int64_t>(S);
  const T* P = probs + pr;
  const T* dP = dprobs + pr;
  const float* R = sc ? sc + row * S : nullptr;
  T* out = ds + row * S;
  float rs = 0.0f;
  for (int j = v0 + lane * VEC; j <= i; j += 32 * VEC) {
    float p[VEC], g[VEC];
    load_vec<VEC>(P + j, p);
    load_vec<VEC>(dP + j, g);
#pragma unroll
    for (int k = 0; k < VEC; ++k) rs += j + k >= j0 && j + k <= i ? p[k] * g[k] : 0.0f;
  }
  rs = warp_sum(rs);
  for (int j = lane * VEC; j < S; j += 32 * VEC) {
    float o[VEC];
    if (j + VEC > j0 && j <= i) {
      float p[VEC], g[VEC];
      load_vec<VEC>(P + j, p);
      load_vec<VEC>(dP + j, g);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const bool in = j + k >= j0 && j + k <= i;
        float v = in ? p[k] * (g[k] - rs) : 0.0f;
        if (R && in) {
          const float t = cap_tanh(R[j + k], cap);
          v *= 1.0f - t * t;
        }
        o[k] = v;
      }
    } else {
#pragma unroll
      for (int k = 0; k < VEC; ++k) o[k] = 0.0f;
    }
    store_vec<VEC>(out + j, o);
  }
}

// One warp per row: the row's sink term p_sink * sum_j P dP over sc[row, 0] (lane 0, after
// every lane has read the row).
template <class T>
__global__ void __launch_bounds__(256)
    sink_rows_kernel(const T* __restrict__ probs, const T* __restrict__ dprobs, float* sc, int B,
                     int S, int heads, int h, int window, float cap, const T* __restrict__ sinks) {
  const int lane = threadIdx.x & 31;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (row >= static_cast<std::int64_t>(B) * S) return;
  const std::int64_t b = row / S;
  const int i = static_cast<int>(row % S);
  const int j0 = band_first_key(window, i);
  float* src = sc + row * S;
  const std::int64_t pr = ((b * heads + h) * S + i) * static_cast<std::int64_t>(S);
  const float sink = to_f(sinks[h]);
  float mx = sink, rs = 0.0f;
  for (int j = j0 + lane; j <= i; j += 32) {
    mx = fmaxf(mx, capped_score(src[j], cap));
    rs += to_f(probs[pr + j]) * to_f(dprobs[pr + j]);
  }
  mx = warp_max(mx);
  rs = warp_sum(rs);
  float z = 0.0f;
  for (int j = j0 + lane; j <= i; j += 32) z += expf(capped_score(src[j], cap) - mx);
  z = warp_sum(z) + expf(sink - mx);
  if (lane == 0) src[0] = expf(sink - mx) / z * rs;
}

// One block: dsinks[h] -= the sum of sc[r * S] over the B * S rows, each thread's rows in order
// and then a fixed tree, in double.
template <class T>
__global__ void __launch_bounds__(256)
    sink_sum_kernel(const float* __restrict__ sc, std::int64_t rows, int S, T* dsinks, int h) {
  __shared__ double part[256];
  double acc = 0.0;
  for (std::int64_t r = threadIdx.x; r < rows; r += 256) acc += sc[r * S];
  acc = detail::block_sum_fixed<256>(acc, part);
  if (threadIdx.x == 0) dsinks[h] = from_f<T>(to_f(dsinks[h]) - static_cast<float>(acc));
}

template <class T>
__global__ void __launch_bounds__(256)
    band_store_kernel(const float* __restrict__ src, T* __restrict__ dp, int B, int S,
                      int heads, int h, int window, bool acc) {
  const std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t per_b = static_cast<std::int64_t>(S) * S;
  if (idx >= static_cast<std::int64_t>(B) * per_b) return;
  const std::int64_t b = idx / per_b, rem = idx % per_b;
  const int i = static_cast<int>(rem / S), j = static_cast<int>(rem % S);
  T* o = dp + (b * heads + h) * per_b + rem;
  if (in_band(window, i, j)) *o = from_f<T>(acc ? to_f(*o) + src[idx] : src[idx]);
  else if (!acc) *o = from_f<T>(0.0f);
}

// One warp per row (b, i): zeros in columns 0 .. first_key(i) - 1 and i + 1 .. S - 1.
template <class T>
__global__ void __launch_bounds__(256)
    zero_outside_band_kernel(T* __restrict__ x, int B, int S, int heads, int h, int window) {
  const int lane = threadIdx.x & 31;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (row >= static_cast<std::int64_t>(B) * S) return;
  const std::int64_t b = row / S;
  const int i = static_cast<int>(row % S);
  T* dst = x + ((b * heads + h) * S + i) * static_cast<std::int64_t>(S);
  const int j0 = band_first_key(window, i);
  for (int j = lane; j < j0; j += 32) dst[j] = from_f<T>(0.0f);
  for (int j = i + 1 + lane; j < S; j += 32) dst[j] = from_f<T>(0.0f);
}

}  // namespace

void attn_softmax_fwd_head(FType t, const float* scores, void* probs, int B, int S, int heads,
                           int h, int window, float softcap, const void* sinks, cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>((static_cast<std::int64_t>(B) * S + 7) / 8);
  const int w = band_within(window, S);
  if (t == FType::BF16)
    softmax_fwd_kernel<bf16><<<blocks, 256, 0, s>>>(scores, static_cast<bf16*>(probs), B, S,
                                                    heads, h, w, softcap,
                                                    static_cast<const bf16*>(sinks));
  else
    softmax_fwd_kernel<float><<<blocks, 256, 0, s>>>(scores, static_cast<float*>(probs), B, S,
                                                     heads, h, w, softcap,
                                                     static_cast<const float*>(sinks));
  check_launch("attn_softmax_fwd");
}

void attn_sink_grad_head(FType t, const void* probs, const void* dprobs, float* scores,
                         const void* sinks, void* dsinks, int B, int S, int heads, int h,
                         int window, float softcap, cudaStream_t s) {
  const std::int64_t rows = static_cast<std::int64_t>(B) * S;
  if (rows <= 0) return;
  const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);
  const int w = band_within(window, S);
  if (t == FType::BF16) {
    sink_rows_kernel<bf16><<<blocks, 256, 0, s>>>(static_cast<const bf16*>(probs),
                                                  static_cast<const bf16*>(dprobs), scores, B, S,
                                                  heads, h, w, softcap,
                                                  static_cast<const bf16*>(sinks));
    sink_sum_kernel<bf16><<<1, 256, 0, s>>>(scores, rows, S, static_cast<bf16*>(dsinks), h);
  } else {
    sink_rows_kernel<float><<<blocks, 256, 0, s>>>(static_cast<const float*>(probs),
                                                   static_cast<const float*>(dprobs), scores, B,
                                                   S, heads, h, w, softcap,
                                                   static_cast<const float*>(sinks));
    sink_sum_kernel<float><<<1, 256, 0, s>>>(scores, rows, S, static_cast<float*>(dsinks), h);
  }
  check_launch("attn_sink_grad");
}

void attn_softmax_bwd_head(FType t, const void* probs, const void* dprobs, const float* scores,
                           void* ds, int B, int S, int heads, int h, int window, float softcap,
                           cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>((static_cast<std::int64_t>(B) * S + 7) / 8);
  const bool aligned = aligned_to(probs, 16) && aligned_to(dprobs, 16) && aligned_to(ds, 16);
  const int w = band_within(window, S);
  const float* sc = softcap > 0.0f ? scores : nullptr;
  if (t == FType::BF16) {
    auto* p = static_cast<const bf16*>(probs);
    auto* g = static_cast<const bf16*>(dprobs);
    auto* o = static_cast<bf16*>(ds);
    if (aligned && S % 8 == 0)
      softmax_bwd_kernel<8, bf16><<<blocks, 256, 0, s>>>(p, g, sc, o, B, S, heads, h, w, softcap);
    else
      softmax_bwd_kernel<1, bf16><<<blocks, 256, 0, s>>>(p, g, sc, o, B, S, heads, h, w, softcap);
  } else {
    auto* p = static_cast<const float*>(probs);
    auto* g = static_cast<const float*>(dprobs);
    auto* o = static_cast<float*>(ds);
    if (aligned && S % 4 == 0)
      softmax_bwd_kernel<4, float><<<blocks, 256, 0, s>>>(p, g, sc, o, B, S, heads, h, w, softcap);
    else
      softmax_bwd_kernel<1, float><<<blocks, 256, 0, s>>>(p, g, sc, o, B, S, heads, h, w, softcap);
  }
  check_launch("attn_softmax_bwd");
}

void attn_band_store_head(FType t, const float* src, void* dp, int B, int S, int heads, int h,
                          int window, bool acc, cudaStream_t s) {
  const std::int64_t n = static_cast<std::int64_t>(B) * S * S;
  if (n <= 0) return;
  const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  const int w = band_within(window, S);
  if (t == FType::BF16)
    band_store_kernel<bf16><<<blocks, 256, 0, s>>>(src, static_cast<bf16*>(dp), B, S, heads, h,
                                                   w, acc);
  else
    band_store_kernel<float><<<blocks, 256, 0, s>>>(src, static_cast<float*>(dp), B, S, heads,
                                                    h, w, acc);
  check_launch("attn_band_store");
}

void attn_zero_outside_band_head(FType t, void* x, int B, int S, int heads, int h, int window,
                                 cudaStream_t s) {
  const std::int64_t rows = static_cast<std::int64_t>(B) * S;
  if (rows <= 0) return;
  const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);
  const int w = band_within(window, S);
  if (t == FType::BF16)
    zero_outside_band_kernel<bf16><<<blocks, 256, 0, s>>>(static_cast<bf16*>(x), B, S, heads, h,
                                                          w);
  else
    zero_outside_band_kernel<float><<<blocks, 256, 0, s>>>(static_cast<float*>(x), B, S, heads,
                                                           h, w);
  check_launch("attn_zero_outside_band");
}

}  // namespace remat::kernels
