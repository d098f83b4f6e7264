#include "kernels/rmsnorm.cuh"

#include "kernels/detail/norm_impl.cuh"

namespace remat::kernels {

using namespace detail;

void rmsnorm_fwd(FType t, const void* x, const void* w, void* y, std::int64_t rows, int H,
                 float eps, cudaStream_t s) {
  if (rows <= 0) return;
  const bool bf = t == FType::BF16;
  const bool vec = norm_vec_ok(H, bf ? 8 : 4, x, w, y, y);
  if (bf) {
    if (vec) norm_fwd_launch<bf16, 8, true>(x, w, nullptr, y, rows, H, eps, s, "rmsnorm_fwd");
    else norm_fwd_launch<bf16, 1, true>(x, w, nullptr, y, rows, H, eps, s, "rmsnorm_fwd");
  } else {
    if (vec) norm_fwd_launch<float, 4, true>(x, w, nullptr, y, rows, H, eps, s, "rmsnorm_fwd");
    else norm_fwd_launch<float, 1, true>(x, w, nullptr, y, rows, H, eps, s, "rmsnorm_fwd");
  }
}

void rmsnorm_bwd(FType t, const void* x, const void* w, const void* dy, void* dx, void* dw,
                 std::int64_t rows, int H, float eps, bool acc, float* scratch, cudaStream_t s) {
  if (rows <= 0) return;
  const bool bf = t == FType::BF16;
  const bool vec = norm_vec_ok(H, bf ? 8 : 4, x, w, dy, dx);
  if (bf) {
    if (vec)
      norm_bwd_launch<bf16, 8, true>(x, w, dy, dx, dw, nullptr, rows, H, eps, acc, scratch, s,
                                     "rmsnorm_bwd");
    else
      norm_bwd_launch<bf16, 1, true>(x, w, dy, dx, dw, nullptr, rows, H, eps, acc, scratch, s,
                                     "rmsnorm_bwd");
  } else {
    if (vec)
      norm_bwd_launch<float, 4, true>(x, w, dy, dx, dw, nullptr, rows, H, eps, acc, scratch, s,
                                      "rmsnorm_bwd");
    else
      norm_bwd_launch<float, 1, true>(x, w, dy, dx, dw, nullptr, rows, H, eps, acc, scratch, s,
                                      "rmsnorm_bwd");
  }
}

}  // namespace remat::kernels
