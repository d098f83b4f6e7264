// Softmax cross-entropy over rows of fp32 logits, fused with the gradient of the logits. The
// caller computes logits in row chunks (see the head in the CUDA backend), so the whole
// [rows, V] fp32 logits never exist.
#pragma once
#include <cstdint>

#include "kernels/launch.cuh"

namespace remat::kernels {

// For each of `rows` rows: losses[r] = logsumexp(logits[r]) - logits[r, targets[r]];
// dlogits[r, j] = (softmax(logits[r])_j - [j == target]) * scale, stored as type t.
// softcap > 0: the logits are softcap * t, t = tanh(raw / softcap) of the given raw ones, and
// dlogits (with respect to the raw logits) has the factor 1 - t^2.
// A target outside [0, V) gives a NaN loss and a zero gradient row.
void cross_entropy_rows(FType t, const float* logits, const std::int32_t* targets, float* losses,
                        void* dlogits, int rows, int V, float scale, float softcap,
                        cudaStream_t s);

}  // namespace remat::kernels
