#include "kernels/cross_entropy.cuh"

#include <cstdint>

#include "kernels/detail/device_utils.cuh"
#include "kernels/detail/xent_row.h"

namespace remat::kernels {
namespace {

using namespace detail;

constexpr int kXentThreads = 512;

// (max, sum) over the block in a fixed order; every thread gets the same pair.
__device__ __forceinline__ MaxSum block_maxsum(MaxSum v, float* red_m, float* red_s) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();  // red_m / red_s may still be read by a previous call
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = maxsum_merge(v, {__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)});
  if (lane == 0) {
    red_m[w] = v.m;
    red_s[w] = v.s;
  }
  __syncthreads();
  MaxSum r = lane < nw ? MaxSum{red_m[lane], red_s[lane]} : maxsum_empty();
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    r = maxsum_merge(r, {__shfl_xor_sync(0xffffffffu, r.m, o), __shfl_xor_sync(0xffffffffu, r.s, o)});
  return r;
}

// One block per row, two passes over the fp32 logits: the running (max, sum of exponentials),
// then the gradient. VEC consecutive logits per load (VEC = 4 needs V % 4 == 0, so that every
// row starts 16-byte aligned). cap > 0: the logits are soft-capped as they are loaded (t =
// tanhf(raw / cap), logit t * cap, as the CPU backend) and the gradient, taken with respect to
// the raw logits, has the factor 1 - t^2 (t recomputed in the second pass).
template <int VEC, class T>
__global__ void __launch_bounds__(kXentThreads)
    xent_kernel(const float* __restrict__ logits, const std::int32_t* __restrict__ targets,
                float* __restrict__ losses, T* __restrict__ dlogits, int V, float scale,
                float cap) {
  __shared__ float red_m[32], red_s[32];
  const std::int64_t r = blockIdx.x;
  const float* x = logits + r * V;
  T* g = dlogits + r * V;
  const int tgt = targets[r];
  const bool valid = tgt >= 0 && tgt < V;
  const int tid = threadIdx.x, nt = blockDim.x;

  auto logit = [&](float raw) { return cap > 0.0f ? tanhf(raw / cap) * cap : raw; };
  auto load = [&](int j, auto& f) {
    load_vec(x + j, f);
    constexpr int n = sizeof(f) / sizeof(float);
    if (cap > 0.0f) {
#pragma unroll
      for (int k = 0; k < n; ++k) f[k] = logit(f[k]);
    }
  };
  const MaxSum acc = row_maxsum_partial<VEC, 4>(V, tid, nt, load);
  const MaxSum row = block_maxsum(acc, red_m, red_s);
  if (tid == 0) losses[r] = valid ? (row.m + logf(row.s)) - logit(x[tgt]) : NAN;

  const float inv = 1.0f / row.s;
  row_stride<VEC, 4>(
      V, tid, nt, [&](int j, auto& f) { load_vec(x + j, f); },
      [&](int j, auto& f) {
        constexpr int n = sizeof(f) / sizeof(float);
#pragma unroll
        for (int k = 0; k < n; ++k) {
          float dcap = 1.0f, l = f[k];
          if (cap > 0.0f) {
            const float t = tanhf(f[k] / cap);
            l = t * cap;
            dcap = 1.0f - t * t;
          }
          const float prob = expf(l - row.m) * inv;
          f[k] = valid ? (j + k == tgt ? prob - 1.0f : prob) * scale * dcap : 0.0f;
        }
        store_vec(g + j, f);
      });
}

template <class T>
void launch_xent(const float* logits, const std::int32_t* targets, float* losses, T* dlogits,
                 int rows, int V, float scale, float cap, cudaStream_t s) {
  const unsigned grid = static_cast<unsigned>(rows);
  const bool aligned = reinterpret_cast<std::uintptr_t>(logits) % 16 == 0 &&
                       reinterpret_cast<std::uintptr_t>(dlogits) % (4 * sizeof(T)) == 0;
  if (V % 4 == 0 && aligned)
    xent_kernel<4, T><<<grid, kXentThreads, 0, s>>>(logits, targets, losses, dlogits, V, scale,
                                                    cap);
  else
    xent_kernel<1, T><<<grid, kXentThreads, 0, s>>>(logits, targets, losses, dlogits, V, scale,
                                                    cap);
}

}  // namespace

void cross_entropy_rows(FType t, const float* logits, const std::int32_t* targets, float* losses,
                        void* dlogits, int rows, int V, float scale, float softcap,
                        cudaStream_t s) {
  if (rows <= 0) return;
  if (t == FType::BF16)
    launch_xent(logits, targets, losses, static_cast<bf16*>(dlogits), rows, V, scale, softcap, s);
  else
    launch_xent(logits, targets, losses, static_cast<float*>(dlogits), rows, V, scale, softcap,
                s);
  check_launch("cross_entropy");
}

}  // namespace remat::kernels
