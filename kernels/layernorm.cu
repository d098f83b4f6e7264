#include "kernels/layernorm.cuh"

#include "kernels/detail/norm_impl.cuh"

namespace remat::kernels {

using namespace detail;

void layernorm_fwd(FType t, const void* x, const void* w, const void* b, void* y,
                   std::int64_t rows, int H, float eps, cudaStream_t s) {
  if (rows <= 0) return;
  const bool bf = t == FType::BF16;
  const bool vec = norm_vec_ok(H, bf ? 8 : 4, x, w, y, b ? b : x);
  if (bf) {
    if (vec) norm_fwd_launch<bf16, 8, false>(x, w, b, y, rows, H, H, eps, s, "layernorm_fwd");
    else norm_fwd_launch<bf16, 1, false>(x, w, b, y, rows, H, H, eps, s, "layernorm_fwd");
  } else {
    if (vec) norm_fwd_launch<float, 4, false>(x, w, b, y, rows, H, H, eps, s, "layernorm_fwd");
    else norm_fwd_launch<float, 1, false>(x, w, b, y, rows, H, H, eps, s, "layernorm_fwd");
  }
}

void layernorm_bwd(FType t, const void* x, const void* w, const void* dy, void* dx, void* dw,
                   void* db, std::int64_t rows, int H, float eps, bool acc, float* scratch,
                   cudaStream_t s) {
  if (rows <= 0) return;
  const bool bf = t == FType::BF16;
  const bool vec = norm_vec_ok(H, bf ? 8 : 4, x, w, dy, dx);
  if (bf) {
    if (vec)
      norm_bwd_launch<bf16, 8, false>(x, w, dy, dx, dw, db, rows, H, H, eps, acc, scratch, s,
                                      "layernorm_bwd");
    else
      norm_bwd_launch<bf16, 1, false>(x, w, dy, dx, dw, db, rows, H, H, eps, acc, scratch, s,
                                      "layernorm_bwd");
  } else {
    if (vec)
      norm_bwd_launch<float, 4, false>(x, w, dy, dx, dw, db, rows, H, H, eps, acc, scratch, s,
                                       "layernorm_bwd");
    else
      norm_bwd_launch<float, 1, false>(x, w, dy, dx, dw, db, rows, H, H, eps, acc, scratch, s,
                                       "layernorm_bwd");
  }
}

}  // namespace remat::kernels
