// The row-wise parts of naive causal attention, one head at a time (the products run through
// cuBLAS). probs and dprobs are [B, heads, S, S]; the per-head buffers are [B, S, S].
#pragma once
#include <cstdint>

#include "kernels/launch.cuh"

namespace remat::kernels {

// probs[b, h, i, j] = softmax over j <= i of scores[b, i, j] (already scaled); 0 for j > i.
void attn_softmax_fwd_head(FType t, const float* scores, void* probs, int B, int S, int heads,
                           int h, cudaStream_t s);
// ds[b, i, j] = P (dP - sum_{j' <= i} P dP) for j <= i, 0 above the diagonal; ds has type t.
void attn_softmax_bwd_head(FType t, const void* probs, const void* dprobs, void* ds, int B, int S,
                           int heads, int h, cudaStream_t s);
// dp[b, h, i, j] = src[b, i, j] for j <= i (acc: +=); above the diagonal 0 (acc: unchanged).
// (The product can also be written straight into dp's head slice; then only the zeros above
// the diagonal remain to be stored: attn_zero_above_diag_head.)
void attn_causal_store_head(FType t, const float* src, void* dp, int B, int S, int heads, int h,
                            bool acc, cudaStream_t s);
// x[b, h, i, j] = 0 for j > i; the rest of the head's slice is left as it is.
void attn_zero_above_diag_head(FType t, void* x, int B, int S, int heads, int h, cudaStream_t s);

}  // namespace remat::kernels
