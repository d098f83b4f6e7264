// The row-wise parts of naive causal attention, one head at a time (the products run through
// cuBLAS). probs and dprobs are [B, heads, S, S]; the per-head buffers are [B, S, S]. The band
// (window: AttnDims::band(), query i sees keys first_key(i) .. i) and the soft cap (softcap > 0:
// score = softcap * tanh(raw / softcap)) follow kernels/detail/attn_band.h. Attention sinks
// (gpt-oss): sinks [heads] in the probabilities' dtype, one more column of every row's softmax,
// never capped, with no value; null: none.
#pragma once
#include <cstdint>

#include "kernels/launch.cuh"

namespace remat::kernels {

// probs[b, h, i, j] = softmax over the band of row i of score(scores[b, i, j]) (scores already
// scaled, soft-capped here when softcap > 0), with sinks[h] in the row's max and sum when sinks
// is given; 0 outside the band.
void attn_softmax_fwd_head(FType t, const float* scores, void* probs, int B, int S, int heads,
                           int h, int window, float softcap, const void* sinks, cudaStream_t s);
// The sink's gradient of head h: dsinks[h] += -sum over (b, i) of p_sink * sum_j P dP, p_sink =
// exp(sink - m) / Z of the row's scores (scores: head h's raw scaled scores [B, S, S] in fp32, as
// attn_softmax_fwd_head reads them). Each row's term is written over scores[b, i, 0] (the
// scores are spent afterwards), then one block sums them in a fixed order (no atomics): the
// same bits every run. dsinks in the probabilities' dtype.
void attn_sink_grad_head(FType t, const void* probs, const void* dprobs, float* scores,
                         const void* sinks, void* dsinks, int B, int S, int heads, int h,
                         int window, float softcap, cudaStream_t s);
// ds[b, i, j] = P (dP - sum_{j' in band} P dP) in the band, 0 outside it; ds has type t. With
// softcap > 0, times 1 - t^2, t = tanh(scores[b, i, j] / softcap) (the raw scaled scores
// [B, S, S] in fp32, recomputed by the caller); scores is not read otherwise.
void attn_softmax_bwd_head(FType t, const void* probs, const void* dprobs, const float* scores,
                           void* ds, int B, int S, int heads, int h, int window, float softcap,
                           cudaStream_t s);
// dp[b, h, i, j] = src[b, i, j] in the band (acc: +=); outside it 0 (acc: unchanged).
// (The product can also be written straight into dp's head slice; then only the zeros outside
// the band remain to be stored: attn_zero_outside_band_head.)
void attn_band_store_head(FType t, const float* src, void* dp, int B, int S, int heads, int h,
                          int window, bool acc, cudaStream_t s);
// x[b, h, i, j] = 0 outside the band; the rest of the head's slice is left as it is.
void attn_zero_outside_band_head(FType t, void* x, int B, int S, int heads, int h, int window,
                                 cudaStream_t s);

}  // namespace remat::kernels
