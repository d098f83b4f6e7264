// Residual adds with optional dropout on the branch: out = res + x * (mask ? (mask[i] ? scale :
// 0) : scale); scale holds the dropout's 1 / (1 - p) times the branch's multiplier.
#pragma once
#include <cstdint>

#include "kernels/launch.cuh"

namespace remat::kernels {

// mask may be null (out = res + x * scale).
void residual_fwd(FType t, const void* res, const void* x, const std::uint8_t* mask, void* out,
                  float scale, std::int64_t n, cudaStream_t s);
// dres (acc_res: +=) = dout; dx (acc_x: +=) = dout * (mask ? scale : 0) (mask null: dout * scale).
// dres or dx may alias dout.
void residual_bwd(FType t, const void* dout, const std::uint8_t* mask, void* dres, void* dx,
                  float scale, std::int64_t n, bool acc_res, bool acc_x, cudaStream_t s);

}  // namespace remat::kernels
