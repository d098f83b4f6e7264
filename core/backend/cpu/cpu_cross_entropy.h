// Cross-entropy over one row of the fused head's logits (cpu_cross_entropy.cpp).
#pragma once

namespace remat::cpu {

// One row of V logits l (raw ones when softcap > 0) against `target`: returns the loss
// logsumexp(z) - z[target] and overwrites l with the gradient of the row's loss times `scale`
// with respect to the raw logits, (softmax(z) - onehot(target)) * scale, where z = l, or, soft-
// capped, z = cap * tanh(l / cap) and the gradient is multiplied by 1 - tanh^2. Runs the active
// SIMD kernel set (cpu_simd.h), or the scalar reference when none is.
float cross_entropy_row(float* l, int V, int target, float scale, float softcap);

// The scalar reference of the same, always.
float cross_entropy_row_reference(float* l, int V, int target, float scale, float softcap);

}  // namespace remat::cpu
