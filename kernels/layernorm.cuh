// LayerNorm over rows of width H (biased variance, as PyTorch): y = (x - mean) * rstd * w + b.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/launch.cuh"
#include "kernels/scratch_bytes.h"

namespace remat::kernels {

// b may be null.
void layernorm_fwd(FType t, const void* x, const void* w, const void* b, void* y,
                   std::int64_t rows, int H, float eps, cudaStream_t s);
// fp32 scratch the backward needs: norm_bwd_scratch_bytes (scratch_bytes.h).
// dx (acc: +=); dw += sum dy * xhat; db += sum dy (db may be null). Statistics recomputed.
void layernorm_bwd(FType t, const void* x, const void* w, const void* dy, void* dx, void* dw,
                   void* db, std::int64_t rows, int H, float eps, bool acc, float* scratch,
                   cudaStream_t s);

}  // namespace remat::kernels
