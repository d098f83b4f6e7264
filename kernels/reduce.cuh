// Deterministic column sums (bias gradients): out[c] (+)= sum over rows of in[r, c]. Rows are
// split into a fixed number of chunks that depends only on the row count; each chunk's partial
// sums land in fp32 scratch and are added in chunk order, so the bits never depend on timing.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/launch.cuh"
#include "kernels/scratch_bytes.h"

namespace remat::kernels {

// Scratch: colsum_scratch_bytes (scratch_bytes.h).
// in: [rows, cols] of in_t; out: [cols] of out_t; acc: add to out instead of overwriting.
void colsum(FType in_t, const void* in, FType out_t, void* out, std::int64_t rows, int cols,
            bool acc, float* scratch, cudaStream_t s);

}  // namespace remat::kernels
