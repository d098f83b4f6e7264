// RMSNorm over rows of width H: y = x * rstd * (off + w), rstd = 1 / sqrt(mean(x^2) + eps), the
// weight's offset added in fp32 (off = 1: Gemma's (1 + w) RMSNorm; 0 elsewhere). (QK-norm, RMSNorm
// over the q and k parts of qkv rows, is all in kernels/qk_norm.cu.)
#pragma once
#include <cstdint>

#include "kernels/launch.cuh"

namespace remat::kernels {

void rmsnorm_fwd(FType t, const void* x, const void* w, void* y, std::int64_t rows, int H,
                 float eps, float off, cudaStream_t s);
// dx (acc: +=); dw += sum dy * xhat. scratch: norm_bwd_scratch_bytes(rows, H) (layernorm.cuh).
void rmsnorm_bwd(FType t, const void* x, const void* w, const void* dy, void* dx, void* dw,
                 std::int64_t rows, int H, float eps, float off, bool acc, float* scratch,
                 cudaStream_t s);

}  // namespace remat::kernels
