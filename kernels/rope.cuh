// RoPE, Hugging Face rotate_half layout, on the q and k heads of a fused qkv
// [B, S, (heads + 2 kv_heads) * d]; the v heads are copied. Pair (i, i + d/2) of a head at
// position s is rotated by s * inv_freq[i] (inv_freq as Hugging Face: fp32 1 / theta^(2i/d)).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/launch.cuh"

namespace remat::kernels {

constexpr int kRopeMaxHalf = 256;  // d <= 512

// fp32 cos and sin tables [S, d/2] each.
std::size_t rope_scratch_bytes(int S, int d);
// sign = +1: out = rotate(in) (forward); sign = -1: the transposed rotation (backward of a
// rotation), added into out when acc. inv_freq: d/2 host values.
void rope_apply(FType t, const void* in, void* out, int B, int S, int heads, int kv_heads, int d,
                const float* inv_freq_host, float sign, bool acc, float* scratch, cudaStream_t s);

}  // namespace remat::kernels
