#include "kernels/rmsnorm.cuh"

#include "kernels/detail/norm_impl.cuh"

namespace remat::kernels {

using namespace detail;

namespace {

// RMSNorm of H columns of rows ld apart; vectorized when H, ld and the pointers allow it.
void rms_fwd(FType t, const void* x, const void* w, void* y, std::int64_t rows, int H,
             std::int64_t ld, float eps, float off, cudaStream_t s, const char* name) {
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

void rms_bwd(FType t, const void* x, const void* w, const void* dy, void* dx, void* dw,
             std::int64_t rows, int H, std::int64_t ld, float eps, float off, bool acc,
             float* scratch, cudaStream_t s, const char* name) {
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

}  // namespace

void rmsnorm_fwd(FType t, const void* x, const void* w, void* y, std::int64_t rows, int H,
                 float eps, float off, cudaStream_t s) {
  if (rows <= 0) return;
  rms_fwd(t, x, w, y, rows, H, H, eps, off, s, "rmsnorm_fwd");
}

void rmsnorm_bwd(FType t, const void* x, const void* w, const void* dy, void* dx, void* dw,
                 std::int64_t rows, int H, float eps, float off, bool acc, float* scratch,
                 cudaStream_t s) {
  if (rows <= 0) return;
  rms_bwd(t, x, w, dy, dx, dw, rows, H, H, eps, off, acc, scratch, s, "rmsnorm_bwd");
}

void qk_norm_fwd(FType t, const void* qkv, const void* wq, const void* wk, void* y,
                 std::int64_t rows, int K, int N, float eps, cudaStream_t s) {
  if (rows <= 0) return;
  const std::int64_t ld = static_cast<std::int64_t>(K) + 2 * N;
  char* yk = const_cast<char*>(at(y, K, t));
  rms_fwd(t, qkv, wq, y, rows, K, ld, eps, 0.0f, s, "qk_norm_fwd");
  rms_fwd(t, at(qkv, K, t), wk, yk, rows, N, ld, eps, 0.0f, s, "qk_norm_fwd");
  v_part(t, qkv, y, rows, K, N, false, s, "qk_norm_fwd");
}

void qk_norm_bwd(FType t, const void* qkv, const void* wq, const void* wk, const void* dy,
                 void* dqkv, void* dwq, void* dwk, std::int64_t rows, int K, int N, float eps,
                 bool acc, float* scratch, cudaStream_t s) {
  if (rows <= 0) return;
  const std::int64_t ld = static_cast<std::int64_t>(K) + 2 * N;
  char* dk = const_cast<char*>(at(dqkv, K, t));
  rms_bwd(t, qkv, wq, dy, dqkv, dwq, rows, K, ld, eps, 0.0f, acc, scratch, s, "qk_norm_bwd");
  rms_bwd(t, at(qkv, K, t), wk, at(dy, K, t), dk, dwk, rows, N, ld, eps, 0.0f, acc, scratch, s,
          "qk_norm_bwd");
  v_part(t, dy, dqkv, rows, K, N, acc, s, "qk_norm_bwd");
}

}  // namespace remat::kernels
