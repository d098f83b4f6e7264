// Naive attention's probabilities in one kernel per op: the causal (optionally banded and
// soft-capped) softmax of the scaled scores Q K^T, written as probs [B, heads, S, S] (zeros
// outside the band), from the packed qkv
// [B, S, (heads + kv_heads) * d + kv_heads * dv] (AttnDims::qkv_width; only q and k are read) of
// every head at once. Two passes over the key tiles of a
// query tile with tensor cores: the row max and sum of exponentials, then the probabilities;
// the [S, S] scores never go to memory (the cuBLAS path writes them as fp32 and reads them back).
#pragma once
#include <cstdint>

#include "kernels/launch.cuh"

namespace remat::kernels {

// Whether attn_probs_fwd runs these arguments: bf16, d in {32, 64, 128}, qkv 16-byte aligned and
// its rows (width elements: AttnDims::qkv_width) a multiple of 16 bytes.
bool attn_probs_supported(FType t, int d, std::int64_t width, const void* qkv);

// window: the band of AttnDims::band() (zeros outside it); softcap > 0: soft-capped scores. dv: the
// value heads' width (AttnDims::v_dim()), which sets the row's width.
void attn_probs_fwd(FType t, const void* qkv, void* probs, int B, int S, int heads, int kv_heads,
                    int d, int dv, float scale, int window, float softcap, cudaStream_t s);

}  // namespace remat::kernels
