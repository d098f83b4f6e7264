// GELU and its derivative as scalar formulas, shared by the CPU loops and the CUDA kernels so
// both backends evaluate the same expressions. Arithmetic in fp32.
#pragma once
#include <math.h>

#include "core/util/bf16.h"  // REMAT_HD

namespace remat {

inline constexpr float kGeluK0 = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluK1 = 0.044715f;
inline constexpr float kInvSqrt2 = 0.7071067811865476f;     // 1 / sqrt(2)
inline constexpr float kInvSqrt2Pi = 0.3989422804014327f;   // 1 / sqrt(2 pi)

// The tanh approximation (GPT-2's gelu_new, PyTorch approximate="tanh"): the argument of its
// tanh, and the value and derivative from t = tanh(that argument), so that a caller can take
// the tanh of many values at once (the CPU's SIMD tanh) or once for both.
REMAT_HD float gelu_tanh_arg(float v) { return kGeluK0 * (v + kGeluK1 * v * v * v); }
REMAT_HD float gelu_tanh_of(float v, float t) { return 0.5f * v * (1.0f + t); }
REMAT_HD float gelu_tanh_grad_of(float v, float t) {
  const float dt = (1.0f - t * t) * kGeluK0 * (1.0f + 3.0f * kGeluK1 * v * v);
  return 0.5f * (1.0f + t) + 0.5f * v * dt;
}

REMAT_HD float gelu_tanh(float v) { return gelu_tanh_of(v, tanhf(gelu_tanh_arg(v))); }
REMAT_HD float gelu_tanh_grad(float v) { return gelu_tanh_grad_of(v, tanhf(gelu_tanh_arg(v))); }

// The exact form x * Phi(x) (GPT-2's activation_function "gelu", PyTorch approximate="none").
REMAT_HD float gelu_erf(float v) { return 0.5f * v * (1.0f + erff(v * kInvSqrt2)); }

// Phi(x) + x * phi(x).
REMAT_HD float gelu_erf_grad(float v) {
  return 0.5f * (1.0f + erff(v * kInvSqrt2)) + v * kInvSqrt2Pi * expf(-0.5f * v * v);
}

}  // namespace remat
