// SwiGLU: gu is [rows, 2F] (gate | up), y = silu(gate) * up is [rows, F]. (GeGLU, the same
// kernels with the tanh GELU, is all in kernels/geglu.cu; both use kernels/detail/gated.cuh.)
#pragma once
#include <cstdint>

#include "kernels/launch.cuh"

namespace remat::kernels {

void swiglu_fwd(FType t, const void* gu, void* y, std::int64_t rows, int F, cudaStream_t s);
// dgu (acc: +=) = [dy * up * sig(g) * (1 + g (1 - sig(g))) | dy * silu(g)].
void swiglu_bwd(FType t, const void* gu, const void* dy, void* dgu, std::int64_t rows, int F,
                bool acc, cudaStream_t s);

}  // namespace remat::kernels
