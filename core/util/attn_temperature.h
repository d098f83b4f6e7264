// Llama 4's attention temperature tuning as one scalar formula, shared by the CPU loops and the
// CUDA kernel: on its layers without RoPE, the queries of position s (0-based) are multiplied by
// tau(s) = log(floor((s + 1) / floor_scale) + 1) * attn_scale + 1, in fp32 as Hugging Face
// computes it. tau is exactly 1 below position floor_scale - 1.
#pragma once
#include <math.h>

#include "core/util/bf16.h"  // REMAT_HD

namespace remat {

REMAT_HD float attn_temperature(int s, int floor_scale, float attn_scale) {
  const float f = floorf((static_cast<float>(s) + 1.0f) / static_cast<float>(floor_scale));
  return logf(f + 1.0f) * attn_scale + 1.0f;
}

}  // namespace remat
