// Cross-entropy rows of the fused head: the scalar reference loops, and the same rows on the
// active SIMD kernel set (row max and exp-sum as the attention softmax's, then the gradient).
#include "core/backend/cpu/cpu_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/backend/cpu/cpu_common.h"
#include "core/backend/cpu/cpu_simd.h"

namespace remat::cpu {

namespace {

// Soft-capped: the row holds t = tanh(raw / cap), the logit is t * cap, d logit / d raw = 1 - t^2.
float reference_capped(float* l, int V, float cap, int target, float scale) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < V; ++j) mx = std::max(mx, l[j] * cap);
  float sum = 0.0f;
  for (int j = 0; j < V; ++j) sum += std::exp(l[j] * cap - mx);
  const float loss = mx + std::log(sum) - l[target] * cap;
  const float inv = 1.0f / sum;
  for (int j = 0; j < V; ++j) {
    const float prob = std::exp(l[j] * cap - mx) * inv;
    l[j] = (j == target ? prob - 1.0f : prob) * scale * (1.0f - l[j] * l[j]);
  }
  return loss;
}

float reference_plain(float* l, int V, int target, float scale) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < V; ++j) mx = std::max(mx, l[j]);
  float sum = 0.0f;
  for (int j = 0; j < V; ++j) sum += std::exp(l[j] - mx);
  const float loss = mx + std::log(sum) - l[target];
  const float inv = 1.0f / sum;
  for (int j = 0; j < V; ++j) {
    const float prob = std::exp(l[j] - mx) * inv;
    l[j] = (j == target ? prob - 1.0f : prob) * scale;
  }
  return loss;
}

}  // namespace

float cross_entropy_row_reference(float* l, int V, int target, float scale, float softcap) {
  if (softcap > 0.0f) {
    tanh_of_quotient(l, V, softcap);
    return reference_capped(l, V, softcap, target, scale);
  }
  return reference_plain(l, V, target, scale);
}

float cross_entropy_row(float* l, int V, int target, float scale, float softcap) {
  const simd::Kernels* k = simd::active();
  if (!k) return cross_entropy_row_reference(l, V, target, scale, softcap);
  if (softcap > 0.0f) {
    tanh_of_quotient(l, V, softcap);
    // cap > 0: the largest t * cap is the largest t times cap
    const float mx = k->row_max(l, V) * softcap;
    const float sum = k->scaled_exp_sum(l, V, softcap, mx);
    const float loss = mx + std::log(sum) - l[target] * softcap;
    k->xent_grad(l, V, target, 1.0f / sum, scale, softcap, mx);
    return loss;
  }
  const float mx = k->row_max(l, V);
  const float lt = l[target];
  const float sum = k->exp_sum(l, V, mx, nullptr, 0, 1.0f);  // the row becomes exp(l - mx)
  const float loss = mx + std::log(sum) - lt;
  k->xent_grad(l, V, target, 1.0f / sum, scale, 0.0f, mx);
  return loss;
}

}  // namespace remat::cpu
