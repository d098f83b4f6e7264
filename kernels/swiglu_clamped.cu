// The clamped SwiGLU (gpt-oss), all of its CUDA side: y = (u + 1) * g * sigmoid(1.702 * g) with
// g = min(gate, limit), u = clamp(up, -limit, limit), over gu [rows, 2F] (gate | up), and the op
// table's entry points CudaBackend::fwd_SwiGluClamped / bwd_SwiGluClamped with their checks.
// A clamped value passes no gradient (torch.clamp's rule: within the bounds, bounds included).
// The formulas are the CPU's (core/util/swiglu_clamped.h).
#include <cmath>
#include <string>

#include "core/backend/cuda/cuda_args.h"
#include "core/backend/cuda/cuda_backend.h"
#include "core/util/error.h"
#include "core/util/swiglu_clamped.h"
#include "kernels/detail/gated.cuh"

namespace remat::kernels {
namespace {

struct ClampedSilu {
  float limit;
  __device__ float out(float gate, float up) const { return swiglu_clamped(gate, up, limit); }
  __device__ void grad(float gate, float up, float d, float& dg, float& du) const {
    swiglu_clamped_grad(gate, up, limit, d, dg, du);
  }
};

void check_limit(const char* op, float limit) {
  if (!(limit > 0.0f) || !std::isfinite(limit))
    throw Error(std::string("cuda ") + op + ": the clamp limit must be a positive number, got " + std::to_string(limit));
}

}  // namespace
}  // namespace remat::kernels

namespace remat::cuda {

// in[0] = gu [M, 2K], out[0] = y [M, K]; a.limit the clamp.
void CudaBackend::fwd_SwiGluClamped(const OpArgs& a) {
  kernels::check_limit("swiglu_clamped_fwd", a.limit);
  check_gated("swiglu_clamped_fwd", *a.in[0], *a.out[0], nullptr, a.M, a.K);
  activate();
  kernels::detail::gated_fwd<kernels::ClampedSilu>(ft(*a.in[0]), a.in[0]->data, a.out[0]->data, a.M, a.K, compute_,
                                                   "swiglu_clamped_fwd", kernels::ClampedSilu{a.limit});
}

// din[0] = dgu (acc[0]: +=), from gu and dout[0] = dy.
void CudaBackend::bwd_SwiGluClamped(const OpArgs& a) {
  kernels::check_limit("swiglu_clamped_bwd", a.limit);
  check_gated("swiglu_clamped_bwd", *a.in[0], *a.dout[0], a.din[0], a.M, a.K);
  activate();
  kernels::detail::gated_bwd<kernels::ClampedSilu>(ft(*a.in[0]), a.in[0]->data, a.dout[0]->data, a.din[0]->data, a.M,
                                                   a.K, a.acc[0], compute_, "swiglu_clamped_bwd",
                                                   kernels::ClampedSilu{a.limit});
}

}  // namespace remat::cuda
