// GELU over n elements, tanh form (as GPT-2): y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
// exact form: y = x Phi(x) = 0.5 x (1 + erf(x / sqrt(2))).
#pragma once
#include <cstdint>

#include "kernels/launch.cuh"

namespace remat::kernels {

void gelu_fwd(FType t, const void* x, void* y, std::int64_t n, cudaStream_t s);
// dx = dy * gelu'(x); acc: dx += instead of =.
void gelu_bwd(FType t, const void* x, const void* dy, void* dx, std::int64_t n, bool acc,
              cudaStream_t s);
void gelu_erf_fwd(FType t, const void* x, void* y, std::int64_t n, cudaStream_t s);
void gelu_erf_bwd(FType t, const void* x, const void* dy, void* dx, std::int64_t n, bool acc,
                  cudaStream_t s);

}  // namespace remat::kernels
