#include "kernels/cross_entropy.cuh"

#include "kernels/detail/device_utils.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

__device__ __forceinline__ float block_max(float v, float* red) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) red[w] = v;
  __syncthreads();
  float r = lane < nw ? red[lane] : -INFINITY;
  return warp_max(r);
}

// One block per row: max, sum of exponentials, then the gradient (three passes, as the CPU).
template <class T>
__global__ void __launch_bounds__(256)
    xent_kernel(const float* __restrict__ logits, const std::int32_t* __restrict__ targets,
                float* __restrict__ losses, T* __restrict__ dlogits, int V, float scale) {
  __shared__ float red[32];
  const std::int64_t r = blockIdx.x;
  const float* x = logits + r * V;
  T* g = dlogits + r * V;
  const int tgt = targets[r];
  const bool valid = tgt >= 0 && tgt < V;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, x[j]);
  mx = block_max(mx, red);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < V; j += blockDim.x) sum += expf(x[j] - mx);
  sum = block_sum(sum, red);
  if (threadIdx.x == 0) losses[r] = valid ? (mx + logf(sum)) - x[tgt] : NAN;
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < V; j += blockDim.x) {
    const float prob = expf(x[j] - mx) * inv;
    g[j] = from_f<T>(valid ? (j == tgt ? prob - 1.0f : prob) * scale : 0.0f);
  }
}

}  // namespace

void cross_entropy_rows(FType t, const float* logits, const std::int32_t* targets, float* losses,
                        void* dlogits, int rows, int V, float scale, cudaStream_t s) {
  if (rows <= 0) return;
  if (t == FType::BF16)
    xent_kernel<bf16><<<static_cast<unsigned>(rows), 256, 0, s>>>(
        logits, targets, losses, static_cast<bf16*>(dlogits), V, scale);
  else
    xent_kernel<float><<<static_cast<unsigned>(rows), 256, 0, s>>>(
        logits, targets, losses, static_cast<float*>(dlogits), V, scale);
  check_launch("cross_entropy");
}

}  // namespace remat::kernels
