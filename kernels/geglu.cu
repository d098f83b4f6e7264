// GeGLU, all of its CUDA side: y = gelu_tanh(gate) * up over gu [rows, 2F] (gate | up), and
// the op table's entry points CudaBackend::fwd_GeGlu / bwd_GeGlu with their argument checks.
// (The gated kernels are kernels/detail/gated.cuh, shared with SwiGLU.)
#include "core/backend/cuda/cuda_args.h"
#include "core/backend/cuda/cuda_backend.h"
#include "core/util/gelu.h"
#include "kernels/detail/gated.cuh"

namespace remat::kernels {
namespace {

// The gate function: y(g), and the gradients of y(g) * u given dy = d:
// dgu = [d * u * gelu_tanh'(g) | d * gelu_tanh(g)].
struct GeluTanh {
  __device__ static float y(float g) { return gelu_tanh(g); }
  __device__ static float out(float g, float u) { return y(g) * u; }
  __device__ static void grad(float g, float u, float d, float& dg, float& du) {
    dg = d * u * gelu_tanh_grad(g);
    du = d * gelu_tanh(g);
  }
};

}  // namespace
}  // namespace remat::kernels

namespace remat::cuda {

// in[0] = gu [M, 2K], out[0] = y [M, K].
void CudaBackend::fwd_GeGlu(const OpArgs& a) {
  check_gated("geglu_fwd", *a.in[0], *a.out[0], nullptr, a.M, a.K);
  activate();
  kernels::detail::gated_fwd<kernels::GeluTanh>(ft(*a.in[0]), a.in[0]->data, a.out[0]->data,
                                                a.M, a.K, compute_, "geglu_fwd");
}

// din[0] = dgu (acc[0]: +=), from gu and dout[0] = dy.
void CudaBackend::bwd_GeGlu(const OpArgs& a) {
  check_gated("geglu_bwd", *a.in[0], *a.dout[0], a.din[0], a.M, a.K);
  activate();
  kernels::detail::gated_bwd<kernels::GeluTanh>(ft(*a.in[0]), a.in[0]->data, a.dout[0]->data,
                                                a.din[0]->data, a.M, a.K, a.acc[0], compute_,
                                                "geglu_bwd");
}

}  // namespace remat::cuda
