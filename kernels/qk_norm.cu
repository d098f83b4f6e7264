// QK-norm (OLMo 2; per head, Qwen3), all of its CUDA side: RMSNorm over the q part (K wide, weight wq) and the k
// part (N wide, weight wk) of each qkv row q | k | v, v copied; and the op table's entry points
// CudaBackend::fwd_QkNorm / bwd_QkNorm with their argument checks. (The RMSNorm kernels are
// kernels/detail/norm_impl.cuh.) Then the op split over tensor-parallel ranks (backend.h):
// CudaBackend::qk_norm_sums / qk_norm_split and their kernels.
#include <algorithm>

#include "core/backend/cuda/cuda_args.h"
#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/cuda_check.h"
#include "kernels/detail/norm_impl.cuh"
#include "kernels/layernorm.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

// The v columns [K + N, K + 2N) of qkv rows: copied from src, or added into dst (acc).
template <class T>
struct VPart {
  const T* src;
  T* dst;
  int K, N;
  bool acc;
  template <int V>
  __device__ void run(std::int64_t i) const {
    const std::int64_t w = static_cast<std::int64_t>(K) + 2 * N;
    const std::int64_t at = (i / N) * w + K + N + i % N;
    const float v = to_f(src[at]);
    dst[at] = from_f<T>(acc ? to_f(dst[at]) + v : v);
  }
};

void v_part(FType t, const void* src, void* dst, std::int64_t rows, int K, int N, bool acc,
            cudaStream_t s, const char* name) {
  if (t == FType::BF16)
    ew_launch<1>(VPart<bf16>{static_cast<const bf16*>(src), static_cast<bf16*>(dst), K, N, acc},
                 rows * N, s, name);
  else
    ew_launch<1>(VPart<float>{static_cast<const float*>(src), static_cast<float*>(dst), K, N, acc},
                 rows * N, s, name);
}

const char* at(const void* p, std::int64_t elems, FType t) {
  return static_cast<const char*>(p) + elems * (t == FType::BF16 ? 2 : 4);
}

// y = [rmsnorm(q) * wq | rmsnorm(k) * wk | v].
void qk_norm_fwd(FType t, const void* qkv, const void* wq, const void* wk, void* y,
                 std::int64_t rows, int K, int N, float eps, cudaStream_t s) {
  if (rows <= 0) return;
  const std::int64_t ld = static_cast<std::int64_t>(K) + 2 * N;
  char* yk = const_cast<char*>(at(y, K, t));
  rms_rows_fwd(t, qkv, wq, y, rows, K, ld, eps, 0.0f, s, "qk_norm_fwd");
  rms_rows_fwd(t, at(qkv, K, t), wk, yk, rows, N, ld, eps, 0.0f, s, "qk_norm_fwd");
  v_part(t, qkv, y, rows, K, N, false, s, "qk_norm_fwd");
}

// dqkv (acc: +=); dwq, dwk +=. scratch: norm_bwd_scratch_bytes(rows, max(K, N)).
void qk_norm_bwd(FType t, const void* qkv, const void* wq, const void* wk, const void* dy,
                 void* dqkv, void* dwq, void* dwk, std::int64_t rows, int K, int N, float eps,
                 bool acc, float* scratch, cudaStream_t s) {
  if (rows <= 0) return;
  const std::int64_t ld = static_cast<std::int64_t>(K) + 2 * N;
  char* dk = const_cast<char*>(at(dqkv, K, t));
  rms_rows_bwd(t, qkv, wq, dy, dqkv, dwq, rows, K, ld, eps, 0.0f, acc, scratch, s,
               "qk_norm_bwd");
  rms_rows_bwd(t, at(qkv, K, t), wk, at(dy, K, t), dk, dwk, rows, N, ld, eps, 0.0f, acc,
               scratch, s, "qk_norm_bwd");
  v_part(t, dy, dqkv, rows, K, N, acc, s, "qk_norm_bwd");
}

// Per head (Qwen3; Gemma 3's weights as (off + w)): each d-wide head of the q part with wq, of
// the k part with wk, v copied;
// the heads one launch each over all rows, their weight gradients accumulated in head order.
void qk_head_norm_fwd(FType t, const void* qkv, const void* wq, const void* wk, void* y,
                      std::int64_t rows, int K, int N, int d, float eps, float off, cudaStream_t s) {
  if (rows <= 0) return;
  const std::int64_t ld = static_cast<std::int64_t>(K) + 2 * N;
  for (int c = 0; c < K + N; c += d)
    rms_rows_fwd(t, at(qkv, c, t), c < K ? wq : wk, const_cast<char*>(at(y, c, t)), rows, d, ld, eps,
                 off, s, "qk_head_norm_fwd");
  v_part(t, qkv, y, rows, K, N, false, s, "qk_head_norm_fwd");
}

// dqkv (acc: +=); dwq, dwk +=. scratch: norm_bwd_scratch_bytes(rows, d).
void qk_head_norm_bwd(FType t, const void* qkv, const void* wq, const void* wk, const void* dy,
                      void* dqkv, void* dwq, void* dwk, std::int64_t rows, int K, int N, int d,
                      float eps, float off, bool acc, float* scratch, cudaStream_t s) {
  if (rows <= 0) return;
  const std::int64_t ld = static_cast<std::int64_t>(K) + 2 * N;
  for (int c = 0; c < K + N; c += d)
    rms_rows_bwd(t, at(qkv, c, t), c < K ? wq : wk, at(dy, c, t), const_cast<char*>(at(dqkv, c, t)),
                 c < K ? dwq : dwk, rows, d, ld, eps, off, acc, scratch, s, "qk_head_norm_bwd");
  v_part(t, dy, dqkv, rows, K, N, acc, s, "qk_head_norm_bwd");
}

}  // namespace
}  // namespace remat::kernels

namespace remat::cuda {

namespace {

// in[0] rows q (K) | k (N) | v (N); w the q weight, b the k weight; y the output or its gradient.
std::int64_t check_qk_norm(const OpArgs& a, const Tensor& x, const Tensor& y, const char* op,
                           const char* y_name = "out") {
  check_no_offset(a, op);
  if (a.M <= 0 || a.K <= 0 || a.N <= 0)
    throw Error(std::string("cuda ") + op + ": bad shape M=" + std::to_string(a.M) +
                " K=" + std::to_string(a.K) + " N=" + std::to_string(a.N));
  const std::int64_t n = a.M * (a.K + 2 * static_cast<std::int64_t>(a.N));
  check_float(x, op, "qkv", n);
  check_float(y, op, y_name, n);
  check_float(*a.w, op, "q weight", a.K);
  check_float(*a.b, op, "k weight", a.N);
  check_same(x, {&y, a.w, a.b}, op);
  return n;
}

}  // namespace

void CudaBackend::fwd_QkNorm(const OpArgs& a) {
  check_qk_norm(a, *a.in[0], *a.out[0], "qk_norm_fwd");
  activate();
  kernels::qk_norm_fwd(ft(*a.in[0]), a.in[0]->data, a.w->data, a.b->data, a.out[0]->data, a.M,
                       a.K, a.N, a.eps, compute_);
}

void CudaBackend::bwd_QkNorm(const OpArgs& a) {
  const char* op = "qk_norm_bwd";
  const std::int64_t n = check_qk_norm(a, *a.in[0], *a.dout[0], op);
  check_float(*a.din[0], op, "dqkv", n);
  check_float(*a.dw, op, "q weight gradient", a.K);
  check_float(*a.db, op, "k weight gradient", a.N);
  check_same(*a.in[0], {a.din[0], a.dw, a.db}, op);
  activate();
  float* part = reinterpret_cast<float*>(
      scratch(kernels::norm_bwd_scratch_bytes(a.M, std::max(a.K, a.N)), op));
  kernels::qk_norm_bwd(ft(*a.in[0]), a.in[0]->data, a.w->data, a.b->data, a.dout[0]->data,
                       a.din[0]->data, a.dw->data, a.db->data, a.M, a.K, a.N, a.eps, a.acc[0],
                       part, compute_);
}

}  // namespace remat::cuda

namespace remat::kernels {
namespace {

using namespace detail;

__device__ __forceinline__ float split_rstd(float sum_sq, int width, float eps) {
  return 1.0f / sqrtf(sum_sq / static_cast<float>(width) + eps);
}

// This rank's partial sums of one part (H columns of rows ld apart), one warp per row:
// sums[r * stride] = sum x * x and, when dy is given, sums[r * stride + 2] = sum dy * w * x.
template <class T, int V>
__global__ void __launch_bounds__(256)
    split_sums_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ dy,
                      float* __restrict__ sums, std::int64_t rows, int H, std::int64_t ld,
                      int stride) {
  const int lane = threadIdx.x & 31;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (row >= rows) return;
  const T* xr = x + row * ld;
  const T* gr = dy ? dy + row * ld : nullptr;
  const int nv = H / V;
  float sq = 0.0f, dot = 0.0f;
  for (int p = lane; p < nv; p += 32) {
    float a[V];
    load_vec<V>(xr + p * V, a);
#pragma unroll
    for (int k = 0; k < V; ++k) sq += a[k] * a[k];
    if (gr) {
      float g[V], wv[V];
      load_vec<V>(gr + p * V, g);
      load_vec<V>(w + p * V, wv);
#pragma unroll
      for (int k = 0; k < V; ++k) dot += g[k] * wv[k] * a[k];
    }
  }
  sq = warp_sum(sq);
  dot = warp_sum(dot);
  if (lane == 0) {
    float* s = sums + row * stride;
    s[0] = sq;
    if (gr) s[2] = dot;
  }
}

// Forward of one part from the summed statistic sums[r * 2]: y = x * rstd * w.
template <class T, int V>
__global__ void __launch_bounds__(256)
    split_fwd_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                     const float* __restrict__ sums, std::int64_t rows, int H, std::int64_t ld,
                     int width, float eps) {
  const int lane = threadIdx.x & 31;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (row >= rows) return;
  const T* xr = x + row * ld;
  T* yr = y + row * ld;
  const float rstd = split_rstd(sums[row * 2], width, eps);
  const int nv = H / V;
  for (int p = lane; p < nv; p += 32) {
    float a[V], wv[V], o[V];
    load_vec<V>(xr + p * V, a);
    load_vec<V>(w + p * V, wv);
#pragma unroll
    for (int k = 0; k < V; ++k) o[k] = a[k] * rstd * wv[k];
    store_vec<V>(yr + p * V, o);
  }
}

// Backward of one part from the summed sums[r * 4] (x * x) and sums[r * 4 + 2] (dy * w * x):
// dx = rstd * (dy * w - xhat * mgx), mgx = sum(dy * w * x) * rstd / width (acc: +=); keeps
// (0, rstd) of the row for the parameter gradient.
template <class T, int V>
__global__ void __launch_bounds__(256)
    split_bwd_dx_kernel(const T* __restrict__ x, const T* __restrict__ w,
                        const T* __restrict__ dy, T* dx, const float* __restrict__ sums,
                        float2* __restrict__ stats, std::int64_t rows, int H, std::int64_t ld,
                        int width, float eps, bool acc) {
  const int lane = threadIdx.x & 31;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (row >= rows) return;
  const T* xr = x + row * ld;
  const T* gr = dy + row * ld;
  T* dxr = dx + row * ld;
  const float rstd = split_rstd(sums[row * 4], width, eps);
  const float mgx = sums[row * 4 + 2] * rstd * (1.0f / static_cast<float>(width));
  const int nv = H / V;
  for (int p = lane; p < nv; p += 32) {
    float a[V], g[V], wv[V], old[V], o[V];
    load_vec<V>(xr + p * V, a);
    load_vec<V>(gr + p * V, g);
    load_vec<V>(w + p * V, wv);
    if (acc) load_vec<V>(dxr + p * V, old);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float d = rstd * (g[k] * wv[k] - a[k] * rstd * mgx);
      o[k] = acc ? old[k] + d : d;
    }
    store_vec<V>(dxr + p * V, o);
  }
  if (lane == 0) stats[row] = make_float2(0.0f, rstd);
}

// Calls f.template operator()<T, V>() with the storage type and the vector width: 16 bytes
// when vec, one element otherwise.
template <class F>
void with_type(FType t, bool vec, F&& f) {
  if (t == FType::BF16) {
    if (vec) f.template operator()<bf16, 8>();
    else f.template operator()<bf16, 1>();
  } else {
    if (vec) f.template operator()<float, 4>();
    else f.template operator()<float, 1>();
  }
}

// One part of each qkv row: H columns of x (and dy, and y or dx) of rows ld apart, its weight
// and its whole width (the statistic's divisor; 0 for the sums).
struct SplitPart {
  const void *x, *w, *dy;
  void* out;  // y or dx
  int H, width;
};

bool part_vec(FType t, const SplitPart& p, std::int64_t ld) {
  const int V = t == FType::BF16 ? 8 : 4;
  return ld % V == 0 && norm_vec_ok(p.H, V, p.x, p.w, p.dy, p.out);
}

// sums [rows, 2] (dy null) or [rows, 4]: per part x * x, then per part dy * w * x.
void qk_norm_sums(FType t, const void* qkv, const void* wq, const void* wk, const void* dy,
                  float* sums, std::int64_t rows, int K, int N, cudaStream_t s, const char* name) {
  if (rows <= 0) return;
  const std::int64_t ld = static_cast<std::int64_t>(K) + 2 * N;
  const int stride = dy ? 4 : 2;
  const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);
  int part = 0;
  const void* dyk = dy ? at(dy, K, t) : nullptr;
  for (const SplitPart& p : {SplitPart{qkv, wq, dy, nullptr, K, 0},
                             SplitPart{at(qkv, K, t), wk, dyk, nullptr, N, 0}}) {
    with_type(t, part_vec(t, p, ld), [&]<class T, int V>() {
      split_sums_kernel<T, V><<<blocks, 256, 0, s>>>(
          static_cast<const T*>(p.x), static_cast<const T*>(p.w), static_cast<const T*>(p.dy),
          sums + part, rows, p.H, ld, stride);
      check_launch(name);
    });
    ++part;
  }
}

// y = [q * rstd_q * wq | k * rstd_k * wk | v], rstd from the summed sums [rows, 2].
void qk_norm_split_fwd(FType t, const void* qkv, const void* wq, const void* wk,
                       const float* sums, void* y, std::int64_t rows, int K, int N, int q_width,
                       int k_width, float eps, cudaStream_t s, const char* name) {
  if (rows <= 0) return;
  const std::int64_t ld = static_cast<std::int64_t>(K) + 2 * N;
  const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);
  int part = 0;
  for (const SplitPart& p : {SplitPart{qkv, wq, nullptr, y, K, q_width},
                             SplitPart{at(qkv, K, t), wk, nullptr, const_cast<char*>(at(y, K, t)),
                                       N, k_width}}) {
    with_type(t, part_vec(t, p, ld), [&]<class T, int V>() {
      split_fwd_kernel<T, V><<<blocks, 256, 0, s>>>(
          static_cast<const T*>(p.x), static_cast<const T*>(p.w), static_cast<T*>(p.out),
          sums + part, rows, p.H, ld, p.width, eps);
      check_launch(name);
    });
    ++part;
  }
  v_part(t, qkv, y, rows, K, N, false, s, name);
}

// dqkv (acc: +=) from the summed sums [rows, 4]; dwq, dwk += column sums of dy * xhat through
// the norm backward's partial and final kernels (fixed row chunks, no atomics).
// scratch: norm_bwd_scratch_bytes(rows, max(K, N)).
void qk_norm_split_bwd(FType t, const void* qkv, const void* wq, const void* wk, const void* dy,
                       const float* sums, void* dqkv, void* dwq, void* dwk, std::int64_t rows,
                       int K, int N, int q_width, int k_width, float eps, bool acc,
                       float* scratch, cudaStream_t s, const char* name) {
  if (rows <= 0) return;
  const std::int64_t ld = static_cast<std::int64_t>(K) + 2 * N;
  float2* stats = reinterpret_cast<float2*>(scratch);
  float* partial = norm_bwd_partials(scratch, rows);
  const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);
  void* dws[2] = {dwq, dwk};
  int part = 0;
  for (const SplitPart& p : {SplitPart{qkv, wq, dy, dqkv, K, q_width},
                             SplitPart{at(qkv, K, t), wk, at(dy, K, t),
                                       const_cast<char*>(at(dqkv, K, t)), N, k_width}}) {
    with_type(t, part_vec(t, p, ld), [&]<class T, int V>() {
      split_bwd_dx_kernel<T, V><<<blocks, 256, 0, s>>>(
          static_cast<const T*>(p.x), static_cast<const T*>(p.w), static_cast<const T*>(p.dy),
          static_cast<T*>(p.out), sums + part, stats, rows, p.H, ld, p.width, eps, acc);
      check_launch(name);
      norm_params_launch<T>(p.x, p.dy, stats, partial, dws[part], nullptr, rows, p.H, ld, s, name);
    });
    ++part;
  }
  v_part(t, dy, dqkv, rows, K, N, acc, s, name);
}

}  // namespace
}  // namespace remat::kernels

namespace remat::cuda {

namespace {

// The split op's operands, as CpuBackend's: sums fp32 [M, 2] forward, [M, 4] backward.
void check_split(Pass pass, const OpArgs& a, const Tensor& sums, const char* op) {
  const bool fwd = pass == Pass::Forward;
  const std::int64_t n = check_qk_norm(a, *a.in[0], fwd ? *a.out[0] : *a.dout[0], op,
                                       fwd ? "out" : "dout");
  check_dtype(sums, DType::F32, op, "row sums", a.M * (fwd ? 2 : 4));
  if (fwd) return;
  check_float(*a.din[0], op, "dqkv", n);
  check_float(*a.dw, op, "q weight gradient", a.K);
  check_float(*a.db, op, "k weight gradient", a.N);
  check_same(*a.in[0], {a.din[0], a.dw, a.db}, op);
}

}  // namespace

void CudaBackend::qk_norm_sums(Pass pass, const OpArgs& a, const Tensor& sums) {
  const bool fwd = pass == Pass::Forward;
  const char* op = fwd ? "qk_norm_sums_fwd" : "qk_norm_sums_bwd";
  check_split(pass, a, sums, op);
  activate();
  kernels::qk_norm_sums(ft(*a.in[0]), a.in[0]->data, a.w->data, a.b->data,
                        fwd ? nullptr : a.dout[0]->data, sums.as<float>(), a.M, a.K, a.N,
                        compute_, op);
}

void CudaBackend::qk_norm_split(Pass pass, const OpArgs& a, const Tensor& sums, int q_width,
                                int k_width) {
  const bool fwd = pass == Pass::Forward;
  const char* op = fwd ? "qk_norm_split_fwd" : "qk_norm_split_bwd";
  check_split(pass, a, sums, op);
  if (q_width < a.K || k_width < a.N)
    throw Error(std::string("cuda ") + op + ": whole widths " + std::to_string(q_width) +
                " and " + std::to_string(k_width) + " are below this rank's " +
                std::to_string(a.K) + " and " + std::to_string(a.N));
  activate();
  if (fwd) {
    kernels::qk_norm_split_fwd(ft(*a.in[0]), a.in[0]->data, a.w->data, a.b->data,
                               sums.as<float>(), a.out[0]->data, a.M, a.K, a.N, q_width, k_width,
                               a.eps, compute_, op);
    return;
  }
  float* part = reinterpret_cast<float*>(
      scratch(kernels::norm_bwd_scratch_bytes(a.M, std::max(a.K, a.N)), op));
  kernels::qk_norm_split_bwd(ft(*a.in[0]), a.in[0]->data, a.w->data, a.b->data,
                             a.dout[0]->data, sums.as<float>(), a.din[0]->data, a.dw->data,
                             a.db->data, a.M, a.K, a.N, q_width, k_width, a.eps, a.acc[0], part,
                             compute_, op);
}

}  // namespace remat::cuda

namespace remat::cuda {

namespace {

// check_qk_norm's shapes with d-wide weights and whole heads.
std::int64_t check_qk_head_norm(const OpArgs& a, const Tensor& y, const char* op, const char* y_name) {
  const int d = a.attn.d;
  if (a.M <= 0 || d <= 0 || a.K <= 0 || a.N <= 0 || a.K % d != 0 || a.N % d != 0)
    throw Error(std::string("cuda ") + op + ": bad shape M=" + std::to_string(a.M) + " K=" +
                std::to_string(a.K) + " N=" + std::to_string(a.N) + " d=" + std::to_string(d));
  const std::int64_t n = a.M * (a.K + 2 * static_cast<std::int64_t>(a.N));
  check_float(*a.in[0], op, "qkv", n);
  check_float(y, op, y_name, n);
  if (!a.w != !a.b) throw Error(std::string("cuda ") + op + ": the q and k weights come together or not at all");
  if (!a.w && a.w_offset != 0.0f) throw Error(std::string("cuda ") + op + ": a weight offset without weights");
  if (a.w) {
    check_float(*a.w, op, "q weight", d);
    check_float(*a.b, op, "k weight", d);
    check_same(*a.in[0], {&y, a.w, a.b}, op);
  } else {
    check_same(*a.in[0], {&y}, op);
  }
  return n;
}

}  // namespace

// Without weights (Llama 4's L2 norm) the kernels run with a zero weight at offset 1, and the
// backward's weight gradients go to a row of scratch nobody reads: [zeros d][dw d][partials].
void CudaBackend::fwd_QkHeadNorm(const OpArgs& a) {
  const char* op = "qk_head_norm_fwd";
  check_qk_head_norm(a, *a.out[0], op, "out");
  activate();
  const void* wq = a.w ? a.w->data : nullptr;
  const void* wk = a.b ? a.b->data : nullptr;
  float off = a.w_offset;
  if (!a.w) {
    char* s = scratch(kernels::qk_head_norm_scratch_bytes(0, a.attn.d, false), op);
    REMAT_CUDA(cudaMemsetAsync(s, 0, static_cast<std::size_t>(a.attn.d) * 4, compute_));
    wq = wk = s;
    off = 1.0f;
  }
  kernels::qk_head_norm_fwd(ft(*a.in[0]), a.in[0]->data, wq, wk, a.out[0]->data, a.M, a.K, a.N, a.attn.d,
                            a.eps, off, compute_);
}

void CudaBackend::bwd_QkHeadNorm(const OpArgs& a) {
  const char* op = "qk_head_norm_bwd";
  const std::int64_t n = check_qk_head_norm(a, *a.dout[0], op, "dout");
  check_float(*a.din[0], op, "dqkv", n);
  if (a.w) {
    check_float(*a.dw, op, "q weight gradient", a.attn.d);
    check_float(*a.db, op, "k weight gradient", a.attn.d);
    check_same(*a.in[0], {a.din[0], a.dw, a.db}, op);
  }
  activate();
  char* s = scratch(kernels::qk_head_norm_scratch_bytes(a.M, a.attn.d, a.w != nullptr), op);
  const void *wq = nullptr, *wk = nullptr;
  void *dwq = nullptr, *dwk = nullptr;
  float off = a.w_offset;
  float* part = reinterpret_cast<float*>(s);
  if (a.w) {
    wq = a.w->data, wk = a.b->data, dwq = a.dw->data, dwk = a.db->data;
  } else {
    const std::size_t vec = kernels::align256(static_cast<std::size_t>(a.attn.d) * 4);
    REMAT_CUDA(cudaMemsetAsync(s, 0, static_cast<std::size_t>(a.attn.d) * 4, compute_));
    wq = wk = s;
    dwq = dwk = s + vec;
    part = reinterpret_cast<float*>(s + 2 * vec);
    off = 1.0f;
  }
  kernels::qk_head_norm_bwd(ft(*a.in[0]), a.in[0]->data, wq, wk, a.dout[0]->data, a.din[0]->data, dwq, dwk, a.M,
                            a.K, a.N, a.attn.d, a.eps, off, a.acc[0], part, compute_);
}

}  // namespace remat::cuda
