// LayerNorm and RMSNorm kernels (internal; instantiated by layernorm.cu and rmsnorm.cu).
// Forward: one warp per row. Backward: each block owns a fixed range of rows (a function of the
// row count only), recomputes the row statistics, writes dx, and keeps per-column sums of
// dy * xhat and dy in memory only it touches (each column owned by one thread); a second kernel
// adds the blocks' partial sums in block order. No atomics: the bits are reproducible.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/detail/device_utils.cuh"

namespace remat::kernels::detail {

template <class T, int V, bool RMS>
__global__ void __launch_bounds__(256)
    norm_fwd_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                    T* __restrict__ y, std::int64_t rows, int H, float eps) {
  const int lane = threadIdx.x & 31;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (row >= rows) return;
  const T* xr = x + row * H;
  T* yr = y + row * H;
  const int nv = H / V;
  float mean = 0.0f, rstd;
  if constexpr (!RMS) {
    float s = 0.0f;
    for (int p = lane; p < nv; p += 32) {
      float a[V];
      load_vec<V>(xr + p * V, a);
#pragma unroll
      for (int k = 0; k < V; ++k) s += a[k];
    }
    mean = warp_sum(s) / static_cast<float>(H);
    float v = 0.0f;
    for (int p = lane; p < nv; p += 32) {
      float a[V];
      load_vec<V>(xr + p * V, a);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float d = a[k] - mean;
        v += d * d;
      }
    }
    rstd = 1.0f / sqrtf(warp_sum(v) / static_cast<float>(H) + eps);
  } else {
    float s = 0.0f;
    for (int p = lane; p < nv; p += 32) {
      float a[V];
      load_vec<V>(xr + p * V, a);
#pragma unroll
      for (int k = 0; k < V; ++k) s += a[k] * a[k];
    }
    rstd = 1.0f / sqrtf(warp_sum(s) / static_cast<float>(H) + eps);
  }
  for (int p = lane; p < nv; p += 32) {
    float a[V], wv[V], bv[V], o[V];
    load_vec<V>(xr + p * V, a);
    load_vec<V>(w + p * V, wv);
    if (!RMS && b) load_vec<V>(b + p * V, bv);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float v = (a[k] - mean) * rstd * wv[k];
      if (!RMS && b) v += bv[k];
      o[k] = v;
    }
    store_vec<V>(yr + p * V, o);
  }
}

template <class T, int V, bool RMS>
__global__ void __launch_bounds__(512)
    norm_bwd_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ dy,
                    T* dx, float* __restrict__ part, std::int64_t rows, int H, float eps, bool acc,
                    std::int64_t rows_per_block, bool smem_acc) {
  extern __shared__ float sm[];
  __shared__ float red[64];
  const int nv = H / V;
  float* accw = smem_acc ? sm : part + static_cast<std::int64_t>(blockIdx.x) * 2 * H;
  float* accb = accw + H;
  for (int p = threadIdx.x; p < nv; p += blockDim.x)
#pragma unroll
    for (int k = 0; k < V; ++k) {
      accw[p * V + k] = 0.0f;
      accb[p * V + k] = 0.0f;
    }
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.x) * rows_per_block;
  const std::int64_t r1 = r0 + rows_per_block < rows ? r0 + rows_per_block : rows;
  const float invH = 1.0f / static_cast<float>(H);
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * H;
    const T* gr = dy + r * H;
    T* dxr = dx + r * H;
    float mean = 0.0f, rstd;
    if constexpr (!RMS) {
      float s = 0.0f;
      for (int p = threadIdx.x; p < nv; p += blockDim.x) {
        float a[V];
        load_vec<V>(xr + p * V, a);
#pragma unroll
        for (int k = 0; k < V; ++k) s += a[k];
      }
      mean = block_sum(s, red) / static_cast<float>(H);
      float v = 0.0f;
      for (int p = threadIdx.x; p < nv; p += blockDim.x) {
        float a[V];
        load_vec<V>(xr + p * V, a);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float d = a[k] - mean;
          v += d * d;
        }
      }
      rstd = 1.0f / sqrtf(block_sum(v, red) / static_cast<float>(H) + eps);
    } else {
      float s = 0.0f;
      for (int p = threadIdx.x; p < nv; p += blockDim.x) {
        float a[V];
        load_vec<V>(xr + p * V, a);
#pragma unroll
        for (int k = 0; k < V; ++k) s += a[k] * a[k];
      }
      rstd = 1.0f / sqrtf(block_sum(s, red) / static_cast<float>(H) + eps);
    }
    float sg = 0.0f, sgx = 0.0f;
    for (int p = threadIdx.x; p < nv; p += blockDim.x) {
      float a[V], g[V], wv[V];
      load_vec<V>(xr + p * V, a);
      load_vec<V>(gr + p * V, g);
      load_vec<V>(w + p * V, wv);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float gw = g[k] * wv[k];
        sg += gw;
        sgx += gw * ((a[k] - mean) * rstd);
      }
    }
    block_sum2(sg, sgx, red);
    const float mg = sg * invH, mgx = sgx * invH;
    for (int p = threadIdx.x; p < nv; p += blockDim.x) {
      float a[V], g[V], wv[V], old[V], o[V];
      load_vec<V>(xr + p * V, a);
      load_vec<V>(gr + p * V, g);
      load_vec<V>(w + p * V, wv);
      if (acc) load_vec<V>(dxr + p * V, old);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float xhat = (a[k] - mean) * rstd;
        const float gw = g[k] * wv[k];
        const float d = RMS ? rstd * (gw - xhat * mgx) : rstd * (gw - mg - xhat * mgx);
        o[k] = acc ? old[k] + d : d;
        accw[p * V + k] += g[k] * xhat;
        accb[p * V + k] += g[k];
      }
      store_vec<V>(dxr + p * V, o);
    }
  }
  if (smem_acc) {
    float* pw = part + static_cast<std::int64_t>(blockIdx.x) * 2 * H;
    for (int p = threadIdx.x; p < nv; p += blockDim.x)
#pragma unroll
      for (int k = 0; k < V; ++k) {
        pw[p * V + k] = accw[p * V + k];
        pw[H + p * V + k] = accb[p * V + k];
      }
  }
}

// dw[c] += sum over blocks of the partial sums (block order); db likewise when not null.
template <class T>
__global__ void __launch_bounds__(256)
    norm_params_final(const float* __restrict__ part, T* __restrict__ dw, T* __restrict__ db,
                      int nblocks, int H) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= H) return;
  float sw = 0.0f, sb = 0.0f;
  for (int k = 0; k < nblocks; ++k) {
    sw += part[static_cast<std::int64_t>(k) * 2 * H + c];
    sb += part[static_cast<std::int64_t>(k) * 2 * H + H + c];
  }
  dw[c] = from_f<T>(to_f(dw[c]) + sw);
  if (db) db[c] = from_f<T>(to_f(db[c]) + sb);
}

inline int norm_bwd_blocks(std::int64_t rows) {
  std::int64_t nb = (rows + 3) / 4;
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(nb, 256)));
}

constexpr int kNormSmemMax = 96 * 1024;

template <class T, int V, bool RMS>
void norm_fwd_launch(const void* x, const void* w, const void* b, void* y, std::int64_t rows,
                     int H, float eps, cudaStream_t s, const char* name) {
  const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);
  norm_fwd_kernel<T, V, RMS><<<blocks, 256, 0, s>>>(
      static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b),
      static_cast<T*>(y), rows, H, eps);
  check_launch(name);
}

template <class T, int V, bool RMS>
void norm_bwd_launch(const void* x, const void* w, const void* dy, void* dx, void* dw, void* db,
                     std::int64_t rows, int H, float eps, bool acc, float* part, cudaStream_t s,
                     const char* name) {
  const int nb = norm_bwd_blocks(rows);
  const std::int64_t rpb = (rows + nb - 1) / nb;
  const int nv = H / V;
  int threads = (nv + 31) / 32 * 32;
  threads = std::max(32, std::min(512, threads));
  const int smem_bytes = 2 * H * 4;
  const bool use_smem = smem_bytes <= kNormSmemMax;
  const int dyn = use_smem ? smem_bytes : 0;
  auto kernel = norm_bwd_kernel<T, V, RMS>;
  if (dyn > 48 * 1024) set_smem_limit(reinterpret_cast<const void*>(kernel), dyn, name);
  kernel<<<nb, threads, dyn, s>>>(static_cast<const T*>(x), static_cast<const T*>(w),
                                  static_cast<const T*>(dy), static_cast<T*>(dx), part, rows, H,
                                  eps, acc, rpb, use_smem);
  check_launch(name);
  norm_params_final<T><<<static_cast<unsigned>((H + 255) / 256), 256, 0, s>>>(
      part, static_cast<T*>(dw), static_cast<T*>(db), nb, H);
  check_launch(name);
}

inline bool norm_vec_ok(int H, int V, const void* a, const void* b, const void* c,
                        const void* d) {
  return H % V == 0 && aligned_to(a, 16) && aligned_to(b, 16) && aligned_to(c, 16) &&
         aligned_to(d, 16);
}

}  // namespace remat::kernels::detail
