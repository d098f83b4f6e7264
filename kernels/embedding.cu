#include "kernels/embedding.cuh"

#include <string>

#include <cub/device/device_radix_sort.cuh>

#include "core/util/error.h"
#include "kernels/detail/device_utils.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

template <class T, int V>
__global__ void __launch_bounds__(128)
    embed_fwd_kernel(const std::int32_t* __restrict__ tokens, const T* __restrict__ wte,
                     const T* __restrict__ wpe, T* __restrict__ out, int S, int H,
                     std::int64_t vocab, float scale) {
  const std::int64_t r = blockIdx.x;
  const std::int32_t tok = tokens[r];
  const bool valid = tok >= 0 && tok < vocab;
  const T* te = wte + static_cast<std::int64_t>(valid ? tok : 0) * H;
  const T* pe = wpe ? wpe + (r % S) * H : nullptr;
  T* o = out + r * H;
  const int nv = H / V;
  for (int p = threadIdx.x; p < nv; p += blockDim.x) {
    float a[V], b[V], y[V];
    load_vec<V>(te + p * V, a);
    if (pe) load_vec<V>(pe + p * V, b);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float e = a[k] * scale;
      y[k] = valid ? (pe ? e + b[k] : e) : 0.0f;
    }
    store_vec<V>(o + p * V, y);
  }
}

__global__ void iota_kernel(std::int32_t* v, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) v[i] = static_cast<std::int32_t>(i);
}

// Block i handles sorted entry i when it starts a run of equal tokens: it sums the run's dout
// rows in position order and adds the total to the token's row of dwte once.
template <class T, int V>
__global__ void __launch_bounds__(128)
    embed_bwd_runs(const std::int32_t* __restrict__ keys, const std::int32_t* __restrict__ pos,
                   const T* __restrict__ dout, T* __restrict__ dwte, std::int64_t n, int H,
                   std::int64_t vocab, float scale) {
  const std::int64_t i = blockIdx.x;
  const std::int32_t tok = keys[i];
  if (i > 0 && keys[i - 1] == tok) return;
  if (tok < 0 || tok >= vocab) return;
  __shared__ int s_end;
  if (threadIdx.x == 0) s_end = static_cast<int>(n);
  __syncthreads();
  for (std::int64_t base = i + 1;; base += blockDim.x) {
    const std::int64_t p = base + threadIdx.x;
    const bool stop = p >= n || keys[p] != tok;
    if (stop) atomicMin(&s_end, static_cast<int>(p < n ? p : n));
    if (__syncthreads_or(stop)) break;
  }
  const std::int64_t end = s_end;
  const int nv = H / V;
  for (int p = threadIdx.x; p < nv; p += blockDim.x) {
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = 0.0f;
    std::int64_t j = i;
    for (; j + 4 <= end; j += 4) {
      float a0[V], a1[V], a2[V], a3[V];
      load_vec<V>(dout + static_cast<std::int64_t>(pos[j]) * H + p * V, a0);
      load_vec<V>(dout + static_cast<std::int64_t>(pos[j + 1]) * H + p * V, a1);
      load_vec<V>(dout + static_cast<std::int64_t>(pos[j + 2]) * H + p * V, a2);
      load_vec<V>(dout + static_cast<std::int64_t>(pos[j + 3]) * H + p * V, a3);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = (((acc[k] + a0[k]) + a1[k]) + a2[k]) + a3[k];
    }
    for (; j < end; ++j) {
      float a[V];
      load_vec<V>(dout + static_cast<std::int64_t>(pos[j]) * H + p * V, a);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] += a[k];
    }
    T* row = dwte + static_cast<std::int64_t>(tok) * H + p * V;
    float old[V];
    load_vec<V>(row, old);
#pragma unroll
    for (int k = 0; k < V; ++k) old[k] += acc[k] * scale;
    store_vec<V>(row, old);
  }
}

template <class T>
__global__ void __launch_bounds__(256)
    embed_bwd_pos(const T* __restrict__ dout, T* __restrict__ dwpe, int B, int S, int H) {
  const std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<std::int64_t>(S) * H) return;
  const std::int64_t s = idx / H, c = idx % H;
  float acc = 0.0f;
#pragma unroll 8
  for (int b = 0; b < B; ++b) acc += to_f(dout[(static_cast<std::int64_t>(b) * S + s) * H + c]);
  dwpe[idx] = from_f<T>(to_f(dwpe[idx]) + acc);
}

std::size_t cub_temp_bytes(std::int64_t n) {
  std::size_t temp = 0;
  cudaError_t e = cub::DeviceRadixSort::SortPairs(
      nullptr, temp, static_cast<const std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr),
      static_cast<const std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr),
      static_cast<int>(n), 0, 32, static_cast<cudaStream_t>(0));
  if (e != cudaSuccess)
    throw Error(std::string("embedding_bwd: cub::DeviceRadixSort::SortPairs (size query): ") +
                cudaGetErrorString(e));
  return temp;
}

template <class T, int V>
void run_bwd(const std::int32_t* tokens, const void* dout, void* dwte, void* dwpe, int B, int S,
             int H, std::int64_t vocab, float scale, char* ws, std::size_t temp, cudaStream_t s) {
  const std::int64_t n = static_cast<std::int64_t>(B) * S;
  std::int32_t* keys = reinterpret_cast<std::int32_t*>(ws);
  std::int32_t* pos_in = reinterpret_cast<std::int32_t*>(ws + align256(n * 4));
  std::int32_t* pos = reinterpret_cast<std::int32_t*>(ws + 2 * align256(n * 4));
  void* cub_ws = ws + 3 * align256(n * 4);
  iota_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(pos_in, n);
  check_launch("embedding_bwd_iota");
  std::size_t tb = temp;
  cudaError_t e = cub::DeviceRadixSort::SortPairs(cub_ws, tb, tokens, keys, pos_in, pos,
                                                  static_cast<int>(n), 0, 32, s);
  if (e != cudaSuccess)
    throw Error(std::string("embedding_bwd: cub::DeviceRadixSort::SortPairs: ") +
                cudaGetErrorString(e));
  embed_bwd_runs<T, V><<<static_cast<unsigned>(n), 128, 0, s>>>(
      keys, pos, static_cast<const T*>(dout), static_cast<T*>(dwte), n, H, vocab, scale);
  check_launch("embedding_bwd_runs");
  if (dwpe) {
    const std::int64_t m = static_cast<std::int64_t>(S) * H;
    embed_bwd_pos<T><<<static_cast<unsigned>((m + 255) / 256), 256, 0, s>>>(
        static_cast<const T*>(dout), static_cast<T*>(dwpe), B, S, H);
    check_launch("embedding_bwd_pos");
  }
}

}  // namespace

void embedding_fwd(FType t, const std::int32_t* tokens, const void* wte, const void* wpe,
                   void* out, int B, int S, int H, std::int64_t V, float scale, cudaStream_t s) {
  const std::int64_t rows = static_cast<std::int64_t>(B) * S;
  if (rows <= 0) return;
  const unsigned g = static_cast<unsigned>(rows);
  if (t == FType::BF16) {
    const bool vec = H % 8 == 0 && aligned_to(wte, 16) && aligned_to(out, 16) &&
                     (!wpe || aligned_to(wpe, 16));
    if (vec)
      embed_fwd_kernel<bf16, 8><<<g, 128, 0, s>>>(tokens, static_cast<const bf16*>(wte),
                                                  static_cast<const bf16*>(wpe),
                                                  static_cast<bf16*>(out), S, H, V, scale);
    else
      embed_fwd_kernel<bf16, 1><<<g, 128, 0, s>>>(tokens, static_cast<const bf16*>(wte),
                                                  static_cast<const bf16*>(wpe),
                                                  static_cast<bf16*>(out), S, H, V, scale);
  } else {
    const bool vec = H % 4 == 0 && aligned_to(wte, 16) && aligned_to(out, 16) &&
                     (!wpe || aligned_to(wpe, 16));
    if (vec)
      embed_fwd_kernel<float, 4><<<g, 128, 0, s>>>(tokens, static_cast<const float*>(wte),
                                                   static_cast<const float*>(wpe),
                                                   static_cast<float*>(out), S, H, V, scale);
    else
      embed_fwd_kernel<float, 1><<<g, 128, 0, s>>>(tokens, static_cast<const float*>(wte),
                                                   static_cast<const float*>(wpe),
                                                   static_cast<float*>(out), S, H, V, scale);
  }
  check_launch("embedding_fwd");
}

std::size_t embedding_bwd_scratch_bytes(std::int64_t n) {
  return n <= 0 ? 0 : embedding_bwd_scratch_bytes(n, cub_temp_bytes(n));
}

void embedding_bwd(FType t, const std::int32_t* tokens, const void* dout, void* dwte, void* dwpe,
                   int B, int S, int H, std::int64_t V, float scale, void* scratch,
                   std::size_t scratch_bytes, cudaStream_t s) {
  const std::int64_t n = static_cast<std::int64_t>(B) * S;
  if (n <= 0) return;
  if (n > 0x7fffffff) throw Error("embedding_bwd: more than 2^31 tokens");
  const std::size_t temp = cub_temp_bytes(n);
  const std::size_t need = 3 * align256(static_cast<std::size_t>(n) * 4) + temp;
  if (scratch_bytes < need || !aligned_to(scratch, 256))
    throw Error("embedding_bwd: scratch of " + std::to_string(scratch_bytes) +
                " bytes is too small or unaligned (needs " + std::to_string(need) + ")");
  char* ws = static_cast<char*>(scratch);
  if (t == FType::BF16) {
    const bool vec = H % 8 == 0 && aligned_to(dout, 16) && aligned_to(dwte, 16);
    if (vec) run_bwd<bf16, 8>(tokens, dout, dwte, dwpe, B, S, H, V, scale, ws, temp, s);
    else run_bwd<bf16, 1>(tokens, dout, dwte, dwpe, B, S, H, V, scale, ws, temp, s);
  } else {
    const bool vec = H % 4 == 0 && aligned_to(dout, 16) && aligned_to(dwte, 16);
    if (vec) run_bwd<float, 4>(tokens, dout, dwte, dwpe, B, S, H, V, scale, ws, temp, s);
    else run_bwd<float, 1>(tokens, dout, dwte, dwpe, B, S, H, V, scale, ws, temp, s);
  }
}

}  // namespace remat::kernels
