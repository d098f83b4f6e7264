// dst += src element-wise (either may be fp32 or bf16; rounded once into dst).
#pragma once
#include <cstdint>

#include "kernels/launch.cuh"

namespace remat::kernels {

void add_into(FType dst_t, void* dst, FType src_t, const void* src, std::int64_t n,
              cudaStream_t s);

// y[j * m + i] += bias[i] for j < n, i < m (a row-major [n, m] matrix plus a bias per column);
// y and bias have type t.
void add_bias_cols(FType t, void* y, const void* bias, std::int64_t n, int m, cudaStream_t s);

}  // namespace remat::kernels
