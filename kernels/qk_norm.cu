// QK-norm (OLMo 2), all of its CUDA side: RMSNorm over the q part (K wide, weight wq) and the k
// part (N wide, weight wk) of each qkv row q | k | v, v copied; and the op table's entry points
// CudaBackend::fwd_QkNorm / bwd_QkNorm with their argument checks. (The RMSNorm kernels are
// kernels/detail/norm_impl.cuh.)
#include <algorithm>

#include "core/backend/cuda/cuda_args.h"
#include "core/backend/cuda/cuda_backend.h"
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

}  // namespace
}  // namespace remat::kernels

namespace remat::cuda {

namespace {

// in[0] rows q (K) | k (N) | v (N); w the q weight, b the k weight.
std::int64_t check_qk_norm(const OpArgs& a, const Tensor& x, const Tensor& y, const char* op) {
  check_no_offset(a, op);
  if (a.M <= 0 || a.K <= 0 || a.N <= 0)
    throw Error(std::string("cuda ") + op + ": bad shape M=" + std::to_string(a.M) +
                " K=" + std::to_string(a.K) + " N=" + std::to_string(a.N));
  const std::int64_t n = a.M * (a.K + 2 * static_cast<std::int64_t>(a.N));
  check_float(x, op, "qkv", n);
  check_float(y, op, "out", n);
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
