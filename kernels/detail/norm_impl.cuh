// LayerNorm and RMSNorm kernels (internal; instantiated by layernorm.cu, rmsnorm.cu and
// qk_norm.cu) over H
// columns of rows `ld` elements apart (ld = H for whole rows; QK-norm runs on parts of rows).
// Forward: one warp per row. Backward: one warp per row recomputes the statistics and writes
// dx; the parameter gradients are column sums over fixed row chunks (a function of the row
// count only), added in chunk order by one warp per column. No atomics: the bits reproduce.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/detail/device_utils.cuh"
#include "kernels/scratch_bytes.h"

namespace remat::kernels::detail {

template <class T, int V, bool RMS>
__global__ void __launch_bounds__(256)
    norm_fwd_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                    T* __restrict__ y, std::int64_t rows, int H, std::int64_t ld, float eps,
                    float off) {
  const int lane = threadIdx.x & 31;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (row >= rows) return;
  const T* xr = x + row * ld;
  T* yr = y + row * ld;
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
      float v = (a[k] - mean) * rstd * (RMS ? off + wv[k] : wv[k]);
      if (!RMS && b) v += bv[k];
      o[k] = v;
    }
    store_vec<V>(yr + p * V, o);
  }
}

// Backward, kernel 1: one warp per row recomputes the statistics, writes dx and keeps
// (mean, rstd) of the row for the parameter gradients.
template <class T, int V, bool RMS>
__global__ void __launch_bounds__(256, 4)  // up to 64 registers (ptxas otherwise aims at 32)
    norm_bwd_dx_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ dy,
                       T* dx, float2* __restrict__ stats, std::int64_t rows, int H,
                       std::int64_t ld, float eps, bool acc, float off) {
  const int lane = threadIdx.x & 31;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (row >= rows) return;
  const T* xr = x + row * ld;
  const T* gr = dy + row * ld;
  T* dxr = dx + row * ld;
  const int nv = H / V;
  const float invH = 1.0f / static_cast<float>(H);
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
  float sg = 0.0f, sgx = 0.0f;
  for (int p = lane; p < nv; p += 32) {
    float a[V], g[V], wv[V];
    load_vec<V>(xr + p * V, a);
    load_vec<V>(gr + p * V, g);
    load_vec<V>(w + p * V, wv);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float gw = g[k] * (RMS ? off + wv[k] : wv[k]);
      sg += gw;
      sgx += gw * ((a[k] - mean) * rstd);
    }
  }
  sg = warp_sum(sg);
  sgx = warp_sum(sgx);
  const float mg = sg * invH, mgx = sgx * invH;
  for (int p = lane; p < nv; p += 32) {
    float a[V], g[V], wv[V], old[V], o[V];
    load_vec<V>(xr + p * V, a);
    load_vec<V>(gr + p * V, g);
    load_vec<V>(w + p * V, wv);
    if (acc) load_vec<V>(dxr + p * V, old);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float xhat = (a[k] - mean) * rstd;
      const float gw = g[k] * (RMS ? off + wv[k] : wv[k]);
      const float d = RMS ? rstd * (gw - xhat * mgx) : rstd * (gw - mg - xhat * mgx);
      o[k] = acc ? old[k] + d : d;
    }
    store_vec<V>(dxr + p * V, o);
  }
  if (lane == 0) stats[row] = make_float2(mean, rstd);
}

// Backward, kernel 2: partial column sums of dy * xhat and dy over a fixed chunk of rows. A
// block covers 64 columns (two per thread) and 8 row lanes; the lanes are added in order.
template <class T>
__global__ void __launch_bounds__(256)
    norm_bwd_params_partial(const T* __restrict__ x, const T* __restrict__ dy,
                            const float2* __restrict__ stats, float* __restrict__ part,
                            std::int64_t rows, int H, std::int64_t ld,
                            std::int64_t rows_per_chunk) {
  __shared__ float sw[8][64], sb[8][64];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int c0 = blockIdx.x * 64 + tx * 2;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * rows_per_chunk;
  std::int64_t r1 = r0 + rows_per_chunk;
  if (r1 > rows) r1 = rows;
  float aw0 = 0.0f, aw1 = 0.0f, ab0 = 0.0f, ab1 = 0.0f;
  const bool ok0 = c0 < H, ok1 = c0 + 1 < H;
#pragma unroll 4
  for (std::int64_t r = r0 + ty; r < r1; r += 8) {
    const float2 st = stats[r];
    const std::int64_t base = r * ld + c0;
    if (ok0) {
      const float g = to_f(dy[base]);
      aw0 += g * ((to_f(x[base]) - st.x) * st.y);
      ab0 += g;
    }
    if (ok1) {
      const float g = to_f(dy[base + 1]);
      aw1 += g * ((to_f(x[base + 1]) - st.x) * st.y);
      ab1 += g;
    }
  }
  sw[ty][tx * 2] = aw0;
  sw[ty][tx * 2 + 1] = aw1;
  sb[ty][tx * 2] = ab0;
  sb[ty][tx * 2 + 1] = ab1;
  __syncthreads();
  if (threadIdx.x < 64) {
    const int c = blockIdx.x * 64 + threadIdx.x;
    if (c < H) {
      float a = sw[0][threadIdx.x], bsum = sb[0][threadIdx.x];
#pragma unroll
      for (int k = 1; k < 8; ++k) {
        a += sw[k][threadIdx.x];
        bsum += sb[k][threadIdx.x];
      }
      float* pc = part + static_cast<std::int64_t>(blockIdx.y) * 2 * H;
      pc[c] = a;
      pc[H + c] = bsum;
    }
  }
}

// Backward, kernel 3: dw[c] += sum over chunks (db likewise when not null); one warp per
// column, lane-strided sums and a fixed shuffle tree.
template <class T>
__global__ void __launch_bounds__(256)
    norm_params_final(const float* __restrict__ part, T* __restrict__ dw, T* __restrict__ db,
                      int chunks, int H) {
  const int lane = threadIdx.x & 31;
  const int c = blockIdx.x * 8 + (threadIdx.x >> 5);
  if (c >= H) return;
  float sw = 0.0f, sb = 0.0f;
#pragma unroll 4
  for (int k = lane; k < chunks; k += 32) {
    sw += part[static_cast<std::int64_t>(k) * 2 * H + c];
    sb += part[static_cast<std::int64_t>(k) * 2 * H + H + c];
  }
  sw = warp_sum(sw);
  sb = warp_sum(sb);
  if (lane == 0) {
    dw[c] = from_f<T>(to_f(dw[c]) + sw);
    if (db) db[c] = from_f<T>(to_f(db[c]) + sb);
  }
}

// Scratch (scratch_bytes.h): per-row (mean, rstd), then chunks x 2H partial sums (fp32).
using kernels::norm_bwd_chunks;

template <class T, int V, bool RMS>
void norm_fwd_launch(const void* x, const void* w, const void* b, void* y, std::int64_t rows,
                     int H, std::int64_t ld, float eps, cudaStream_t s, const char* name,
                     float off = 0.0f) {
  const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);
  norm_fwd_kernel<T, V, RMS><<<blocks, 256, 0, s>>>(
      static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b),
      static_cast<T*>(y), rows, H, ld, eps, off);
  check_launch(name);
}

// The partial column sums' place in the scratch: after the per-row stats.
inline float* norm_bwd_partials(float* scratch, std::int64_t rows) {
  return scratch + kernels::norm_bwd_scratch_bytes(rows, 0) / 4;
}

// dw (and db, unless null) += the column sums of the rows' gradient terms, from the per-row
// (mean, rstd) `stats` a dx kernel left: each fixed chunk of rows into `part`, then the chunks
// added in order (no atomics, the same bits every run).
template <class T>
void norm_params_launch(const void* x, const void* dy, const float2* stats, float* part, void* dw, void* db,
                        std::int64_t rows, int H, std::int64_t ld, cudaStream_t s, const char* name) {
  const int chunks = norm_bwd_chunks(rows);
  const std::int64_t rpc = (rows + chunks - 1) / chunks;
  dim3 grid(static_cast<unsigned>((H + 63) / 64), static_cast<unsigned>(chunks));
  norm_bwd_params_partial<T><<<grid, 256, 0, s>>>(static_cast<const T*>(x),
                                                  static_cast<const T*>(dy), stats, part, rows, H,
                                                  ld, rpc);
  check_launch(name);
  norm_params_final<T><<<static_cast<unsigned>((H + 7) / 8), 256, 0, s>>>(
      part, static_cast<T*>(dw), static_cast<T*>(db), chunks, H);
  check_launch(name);
}

template <class T, int V, bool RMS>
void norm_bwd_launch(const void* x, const void* w, const void* dy, void* dx, void* dw, void* db,
                     std::int64_t rows, int H, std::int64_t ld, float eps, bool acc,
                     float* scratch, cudaStream_t s, const char* name, float off = 0.0f) {
  float2* stats = reinterpret_cast<float2*>(scratch);
  norm_bwd_dx_kernel<T, V, RMS><<<static_cast<unsigned>((rows + 7) / 8), 256, 0, s>>>(
      static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(dy),
      static_cast<T*>(dx), stats, rows, H, ld, eps, acc, off);
  check_launch(name);
  norm_params_launch<T>(x, dy, stats, norm_bwd_partials(scratch, rows), dw, db, rows, H, ld, s, name);
}

inline bool norm_vec_ok(int H, int V, const void* a, const void* b, const void* c,
                        const void* d) {
  return H % V == 0 && aligned_to(a, 16) && aligned_to(b, 16) && aligned_to(c, 16) &&
         aligned_to(d, 16);
}

// RMSNorm of H columns of rows ld apart (rmsnorm.cu; the q and k parts of QK-norm,
// qk_norm.cu); vectorized when H, ld and the pointers allow it.
inline void rms_rows_fwd(FType t, const void* x, const void* w, void* y, std::int64_t rows,
                         int H, std::int64_t ld, float eps, float off, cudaStream_t s,
                         const char* name) {
  const bool bf = t == FType::BF16;
  const int V = bf ? 8 : 4;
  const bool vec = ld % V == 0 && norm_vec_ok(H, V, x, w, y, y);
  if (bf) {
    if (vec) norm_fwd_launch<bf16, 8, true>(x, w, nullptr, y, rows, H, ld, eps, s, name, off);
    else norm_fwd_launch<bf16, 1, true>(x, w, nullptr, y, rows, H, ld, eps, s, name, off);
  } else {
    if (vec) norm_fwd_launch<float, 4, true>(x, w, nullptr, y, rows, H, ld, eps, s, name, off);
    else norm_fwd_launch<float, 1, true>(x, w, nullptr, y, rows, H, ld, eps, s, name, off);
  }
}

inline void rms_rows_bwd(FType t, const void* x, const void* w, const void* dy, void* dx,
                         void* dw, std::int64_t rows, int H, std::int64_t ld, float eps,
                         float off, bool acc, float* scratch, cudaStream_t s, const char* name) {
  const bool bf = t == FType::BF16;
  const int V = bf ? 8 : 4;
  const bool vec = ld % V == 0 && norm_vec_ok(H, V, x, w, dy, dx);
  if (bf) {
    if (vec) norm_bwd_launch<bf16, 8, true>(x, w, dy, dx, dw, nullptr, rows, H, ld, eps, acc, scratch, s, name, off);
    else norm_bwd_launch<bf16, 1, true>(x, w, dy, dx, dw, nullptr, rows, H, ld, eps, acc, scratch, s, name, off);
  } else {
    if (vec) norm_bwd_launch<float, 4, true>(x, w, dy, dx, dw, nullptr, rows, H, ld, eps, acc, scratch, s, name, off);
    else norm_bwd_launch<float, 1, true>(x, w, dy, dx, dw, nullptr, rows, H, ld, eps, acc, scratch, s, name, off);
  }
}

}  // namespace remat::kernels::detail
