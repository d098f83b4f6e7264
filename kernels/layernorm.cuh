// LayerNorm over rows of width H (biased variance, as PyTorch): y = (x - mean) * rstd * w + b.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/launch.cuh"

namespace remat::kernels {

// b may be null.
void layernorm_fwd(FType t, const void* x, const void* w, const void* b, void* y,
                   std::int64_t rows, int H, float eps, cudaStream_t s);
// fp32 scratch the backward needs (partial column sums).
std::size_t norm_bwd_scratch_bytes(std::int64_t rows, int H);
// dx (acc: +=); dw += sum dy * xhat; db += sum dy (db may be null). Statistics recomputed.
void layernorm_bwd(FType t, const void* x, const void* w, const void* dy, void* dx, void* dw,
                   void* db, std::int64_t rows, int H, float eps, bool acc, float* scratch,
                   cudaStream_t s);

}  // namespace remat::kernels
