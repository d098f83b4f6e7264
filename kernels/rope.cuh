// RoPE, Hugging Face rotate_half layout, on the q and k heads of a fused qkv
// [B, S, (heads + kv_heads) * d + kv_heads * dv] (AttnDims::qkv_width); the v heads are copied.
// Only the first rotary_dim dims of a head are rotated (partial rotary): pair
// (i, i + rotary_dim/2) at position s by s * inv_freq[i] (inv_freq as Hugging Face, rotary_dim/2
// fp32 values); the other d - rotary_dim dims are copied (their gradient passes through). cos
// and sin are multiplied by attention_scaling (YaRN, LongRoPE; 1 otherwise).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/launch.cuh"
#include "kernels/scratch_bytes.h"

namespace remat::kernels {

constexpr int kRopeMaxHalf = 256;  // d <= 512

// fp32 cos and sin tables [S, rotary_dim/2] each (sized for rotary_dim = d, the most).
// Scratch: rope_scratch_bytes (scratch_bytes.h).
// sign = +1: out = rotate(in) (forward); sign = -1: the transposed rotation (backward of a
// rotation), added into out when acc. inv_freq: rotary_dim/2 host values. interleaved: pairs
// (2i, 2i + 1) (RopeTable::interleaved), else (i, i + rotary_dim/2).
void rope_apply(FType t, const void* in, void* out, int B, int S, int heads, int kv_heads, int d,
                int dv, int rotary_dim, const float* inv_freq_host, float attention_scaling,
                float sign, bool acc, float* scratch, cudaStream_t s, bool interleaved = false);

// Llama 4's temperature tuning (RopeTable::temp_floor): out = in with the q heads of position s
// times attn_temperature(s) (core/util/attn_temperature.h), added into out when acc; the
// backward is the same map.
void rope_temperature(FType t, const void* in, void* out, int B, int S, int heads, int kv_heads, int d, int dv,
                      int floor_scale, float attn_scale, bool acc, cudaStream_t s);

}  // namespace remat::kernels
