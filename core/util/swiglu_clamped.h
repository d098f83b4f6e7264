// gpt-oss's clamped SwiGLU and its derivative as scalar formulas, shared by the CPU loops and the
// CUDA kernels so both backends evaluate the same expressions (fp32): with g = min(gate, limit)
// and u = clamp(up, -limit, limit), y = (u + 1) * g * sigmoid(1.702 * g). A clamped value passes
// no gradient (torch.clamp's rule: within the bounds, bounds included); a NaN passes through the
// clamps as std::min and std::clamp let it (fminf would give the bound).
#pragma once
#include <math.h>

#include "core/util/bf16.h"  // REMAT_HD

namespace remat {

inline constexpr float kSwigluAlpha = 1.702f;

REMAT_HD float clamp_max_nan(float v, float hi) { return hi < v ? hi : v; }
REMAT_HD float clamp_nan(float v, float lo, float hi) { return v < lo ? lo : hi < v ? hi : v; }

REMAT_HD float swiglu_clamped(float gate, float up, float limit) {
  const float g = clamp_max_nan(gate, limit), u = clamp_nan(up, -limit, limit);
  const float glu = g * (1.0f / (1.0f + expf(-(g * kSwigluAlpha))));
  return (u + 1.0f) * glu;
}

// d: the output's gradient; dg, du: the gate's and the up value's.
REMAT_HD void swiglu_clamped_grad(float gate, float up, float limit, float d, float& dg, float& du) {
  const float g = clamp_max_nan(gate, limit), u = clamp_nan(up, -limit, limit);
  const float s = 1.0f / (1.0f + expf(-(g * kSwigluAlpha)));
  const float glu = g * s;
  dg = gate <= limit ? d * (u + 1.0f) * (s + g * kSwigluAlpha * s * (1.0f - s)) : 0.0f;
  du = up >= -limit && up <= limit ? d * glu : 0.0f;
}

}  // namespace remat
