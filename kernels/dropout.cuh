// Dropout masks from their Philox key alone, and their application.
#pragma once
#include <cstdint>

#include "core/util/philox.h"
#include "kernels/launch.cuh"

namespace remat::kernels {

// mask[i] = philox_bits(key, i) >= threshold (1 = kept), i in [0, n).
void dropout_mask(std::uint8_t* mask, const DropoutKey& key, std::uint32_t threshold,
                  std::int64_t n, cudaStream_t s);
// y = x * (mask ? scale : 0), scale = 1 / (1 - p).
void dropout_fwd(FType t, const void* x, const std::uint8_t* mask, void* y, float scale,
                 std::int64_t n, cudaStream_t s);
// dx (acc: +=) = dy * (mask ? scale : 0).
void dropout_bwd(FType t, const void* dy, const std::uint8_t* mask, void* dx, float scale,
                 std::int64_t n, bool acc, cudaStream_t s);

}  // namespace remat::kernels
