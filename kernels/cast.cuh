// Element-wise conversion between fp32 and bf16 storage (rounding to nearest even).
#pragma once
#include <cstdint>

#include "kernels/launch.cuh"

namespace remat::kernels {

// dst[i] = src[i] converted; the same type is a device copy.
void cast(FType dst_t, void* dst, FType src_t, const void* src, std::int64_t n, cudaStream_t s);

}  // namespace remat::kernels
