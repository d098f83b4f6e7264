// Gated MLP activations: gu is [rows, 2F] (gate | up), y = act(gate) * up is [rows, F];
// SwiGLU (act = silu) and GeGLU (act = tanh GELU).
#pragma once
#include <cstdint>

#include "kernels/launch.cuh"

namespace remat::kernels {

void swiglu_fwd(FType t, const void* gu, void* y, std::int64_t rows, int F, cudaStream_t s);
// dgu (acc: +=) = [dy * up * sig(g) * (1 + g (1 - sig(g))) | dy * silu(g)].
void swiglu_bwd(FType t, const void* gu, const void* dy, void* dgu, std::int64_t rows, int F,
                bool acc, cudaStream_t s);

void geglu_fwd(FType t, const void* gu, void* y, std::int64_t rows, int F, cudaStream_t s);
// dgu (acc: +=) = [dy * up * gelu_tanh'(g) | dy * gelu_tanh(g)].
void geglu_bwd(FType t, const void* gu, const void* dy, void* dgu, std::int64_t rows, int F,
               bool acc, cudaStream_t s);

}  // namespace remat::kernels
