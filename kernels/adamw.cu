#include "kernels/adamw.cuh"

#include "kernels/detail/device_utils.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

constexpr int kMaxSeg = 48;
constexpr int kItems = 4;               // elements per thread
constexpr int kThreads = 256;
constexpr int kPerBlock = kItems * kThreads;

// A batch of segments passed by value (under the 4 KB parameter limit).
struct SegBatch {
  int count;
  std::int64_t off[kMaxSeg];
  std::int64_t numel[kMaxSeg];
  std::int64_t first_block[kMaxSeg + 1];
  unsigned char decay[kMaxSeg];
};

template <class T, bool ZeroMoments>
__global__ void __launch_bounds__(kThreads)
    adamw_kernel(T* params, const T* __restrict__ grads, float* master, float* __restrict__ m,
                 float* __restrict__ v, SegBatch batch, AdamwScalars k) {
  const std::int64_t blk = blockIdx.x;
  int lo = 0, hi = batch.count - 1;
  while (lo < hi) {  // last segment whose first block <= blk
    const int mid = (lo + hi + 1) / 2;
    if (batch.first_block[mid] <= blk) lo = mid;
    else hi = mid - 1;
  }
  const int sidx = lo;
  const std::int64_t local = (blk - batch.first_block[sidx]) * kPerBlock;
  const std::int64_t off = batch.off[sidx], n = batch.numel[sidx];
  const bool dec = batch.decay[sidx] != 0;
  float* mp = master ? master : reinterpret_cast<float*>(params);
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    const std::int64_t e = local + static_cast<std::int64_t>(it) * kThreads + threadIdx.x;
    if (e >= n) break;
    const std::int64_t i = off + e;
    const float g = to_f(grads[i]);
    float p = master ? mp[i] : to_f(params[i]);
    if (dec) p *= k.decay;
    // Zero moments: the same expressions on zeros held in registers (the fused multiply-adds
    // nvcc forms are the same ones; nothing is simplified without fast-math flags).
    const float m0 = ZeroMoments ? 0.0f : m[i], v0 = ZeroMoments ? 0.0f : v[i];
    const float mi = m0 + k.w1 * (g - m0);
    const float vi = v0 * k.b2 + k.w2 * (g * g);
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) / k.bc2_sqrt + k.eps;
    p = p - k.step_size * (mi / denom);
    if (master) {
      master[i] = p;
      params[i] = from_f<T>(p);
    } else {
      params[i] = from_f<T>(p);
    }
  }
}

template <class T>
void run(void* params, const void* grads, float* master, float* m, float* v,
         const std::vector<AdamwSeg>& segs, const AdamwScalars& k, cudaStream_t s, bool zero) {
  std::size_t i = 0;
  while (i < segs.size()) {
    SegBatch b{};
    std::int64_t blocks = 0;
    b.count = 0;
    while (i < segs.size() && b.count < kMaxSeg) {
      const AdamwSeg& sg = segs[i++];
      if (sg.numel <= 0) continue;
      b.off[b.count] = sg.offset;
      b.numel[b.count] = sg.numel;
      b.decay[b.count] = sg.decay ? 1 : 0;
      b.first_block[b.count] = blocks;
      blocks += (sg.numel + kPerBlock - 1) / kPerBlock;
      ++b.count;
    }
    if (b.count == 0) continue;
    b.first_block[b.count] = blocks;
    if (zero)
      adamw_kernel<T, true><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(
          static_cast<T*>(params), static_cast<const T*>(grads), master, m, v, b, k);
    else
      adamw_kernel<T, false><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(
          static_cast<T*>(params), static_cast<const T*>(grads), master, m, v, b, k);
    check_launch("adamw");
  }
}

}  // namespace

void adamw(FType t, void* params, const void* grads, float* master, float* m, float* v,
           const std::vector<AdamwSeg>& segs, const AdamwScalars& k, cudaStream_t s,
           bool zero_moments) {
  if (t == FType::BF16) run<bf16>(params, grads, master, m, v, segs, k, s, zero_moments);
  else run<float>(params, grads, master, m, v, segs, k, s, zero_moments);
}

}  // namespace remat::kernels
