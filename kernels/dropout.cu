#include "kernels/dropout.cuh"

#include "kernels/detail/device_utils.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

// Element i of the mask is element mask_position(key, i) of the global mask. `by_four`: every
// four local elements from a multiple of 4 are four global ones from a multiple of 4 (offset,
// run and stride multiples of 4), so one Philox call serves them.
__global__ void __launch_bounds__(256)
    dropout_mask_kernel(std::uint8_t* mask, DropoutKey key, std::uint32_t thr, std::int64_t n,
                        bool vec4, bool by_four) {
  const std::int64_t count = (n + 3) / 4;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t q = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       q < count; q += stride) {
    const std::int64_t i = q * 4;
    if (!by_four) {
      for (int j = 0; j < 4 && i + j < n; ++j) {
        const std::uint64_t p = mask_position(key, static_cast<std::uint64_t>(i + j));
        mask[i + j] = philox_quad(key, p >> 2).v[p & 3u] >= thr ? 1 : 0;
      }
      continue;
    }
    const Philox4 r = philox_quad(key, mask_position(key, static_cast<std::uint64_t>(i)) >> 2);
    if (vec4 && i + 3 < n) {
      uchar4 m;
      m.x = r.v[0] >= thr ? 1 : 0;
      m.y = r.v[1] >= thr ? 1 : 0;
      m.z = r.v[2] >= thr ? 1 : 0;
      m.w = r.v[3] >= thr ? 1 : 0;
      *reinterpret_cast<uchar4*>(mask + i) = m;
    } else {
      for (int j = 0; j < 4 && i + j < n; ++j) mask[i + j] = r.v[j] >= thr ? 1 : 0;
    }
  }
}

template <class T>
struct DropFwd {
  const T* x;
  const std::uint8_t* mask;
  T* y;
  float scale;
  template <int V>
  __device__ void run(std::int64_t i) const {
    float a[V], m[V], o[V];
    load_vec<V>(x + i, a);
    load_mask<V>(mask + i, m);
#pragma unroll
    for (int k = 0; k < V; ++k) o[k] = a[k] * (m[k] != 0.0f ? scale : 0.0f);
    store_vec<V>(y + i, o);
  }
};

template <class T>
struct DropBwd {
  const T* dy;
  const std::uint8_t* mask;
  T* dx;
  float scale;
  bool acc;
  template <int V>
  __device__ void run(std::int64_t i) const {
    float g[V], m[V], o[V], old[V];
    load_vec<V>(dy + i, g);
    load_mask<V>(mask + i, m);
    if (acc) load_vec<V>(dx + i, old);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float r = g[k] * (m[k] != 0.0f ? scale : 0.0f);
      o[k] = acc ? old[k] + r : r;
    }
    store_vec<V>(dx + i, o);
  }
};

}  // namespace

void dropout_mask(std::uint8_t* mask, const DropoutKey& key, std::uint32_t threshold,
                  std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  const std::int64_t quads = (n + 3) / 4;
  std::int64_t blocks = (quads + 255) / 256;
  if (blocks > 8192) blocks = 8192;
  const bool by_four = key.offset % 4 == 0 && (key.run == 0 || (key.run % 4 == 0 && key.stride % 4 == 0));
  dropout_mask_kernel<<<static_cast<unsigned>(blocks), 256, 0, s>>>(mask, key, threshold, n,
                                                                     aligned_to(mask, 4), by_four);
  check_launch("dropout_mask");
}

void dropout_fwd(FType t, const void* x, const std::uint8_t* mask, void* y, float scale,
                 std::int64_t n, cudaStream_t s) {
  const int V = t == FType::BF16 ? 8 : 4;
  const bool vec = aligned_to(x, 16) && aligned_to(y, 16) && aligned_to(mask, V);
  if (t == FType::BF16)
    ew_launch_vec<bf16>(DropFwd<bf16>{static_cast<const bf16*>(x), mask, static_cast<bf16*>(y), scale},
                 vec, n, s, "dropout_fwd");
  else
    ew_launch_vec<float>(
        DropFwd<float>{static_cast<const float*>(x), mask, static_cast<float*>(y), scale}, vec, n,
        s, "dropout_fwd");
}

void dropout_bwd(FType t, const void* dy, const std::uint8_t* mask, void* dx, float scale,
                 std::int64_t n, bool acc, cudaStream_t s) {
  const int V = t == FType::BF16 ? 8 : 4;
  const bool vec = aligned_to(dy, 16) && aligned_to(dx, 16) && aligned_to(mask, V);
  if (t == FType::BF16)
    ew_launch_vec<bf16>(DropBwd<bf16>{static_cast<const bf16*>(dy), mask, static_cast<bf16*>(dx), scale,
                               acc},
                 vec, n, s, "dropout_bwd");
  else
    ew_launch_vec<float>(DropBwd<float>{static_cast<const float*>(dy), mask, static_cast<float*>(dx),
                                 scale, acc},
                  vec, n, s, "dropout_bwd");
}

}  // namespace remat::kernels
