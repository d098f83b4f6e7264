#include "kernels/swiglu.cuh"

#include "kernels/detail/gated.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

// The gate function (kernels/detail/gated.cuh): y(g), and the gradients of y(g) * u given dy = d.
struct Silu {
  __device__ static float y(float g) { return g * (1.0f / (1.0f + expf(-g))); }
  __device__ static float out(float g, float u) { return y(g) * u; }
  __device__ static void grad(float g, float u, float d, float& dg, float& du) {
    const float sig = 1.0f / (1.0f + expf(-g));
    dg = d * u * sig * (1.0f + g * (1.0f - sig));
    du = d * (g * sig);
  }
};

}  // namespace

void swiglu_fwd(FType t, const void* gu, void* y, std::int64_t rows, int F, cudaStream_t s) {
  gated_fwd<Silu>(t, gu, y, rows, F, s, "swiglu_fwd");
}

void swiglu_bwd(FType t, const void* gu, const void* dy, void* dgu, std::int64_t rows, int F,
                bool acc, cudaStream_t s) {
  gated_bwd<Silu>(t, gu, dy, dgu, rows, F, acc, s, "swiglu_bwd");
}

}  // namespace remat::kernels
