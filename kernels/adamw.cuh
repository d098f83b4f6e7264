// AdamW (PyTorch semantics, as the CPU backend) over segments of the flat parameter buffer:
// p *= 1 - lr*wd (decay segments only); m = m + (1-b1)(g - m); v = b2 v + (1-b2) g^2;
// p -= step_size * m / (sqrt(v) / bc2_sqrt + eps). With an fp32 master, the master is updated
// and rounded into params; without, params (fp32) are updated in place. With zero_moments, m and v
// are taken as zeros and only written (a model's first step), with the same arithmetic.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/launch.cuh"

namespace remat::kernels {

struct AdamwSeg {
  std::int64_t offset = 0, numel = 0;
  bool decay = false;
};

struct AdamwScalars {
  float step_size = 0.0f;  // lr / (1 - beta1^t)
  float bc2_sqrt = 1.0f;   // sqrt(1 - beta2^t)
  float decay = 1.0f;      // 1 - lr * wd
  float w1 = 0.0f;         // 1 - beta1
  float b2 = 0.0f, w2 = 0.0f, eps = 0.0f;
};

// params/grads: type t; master (may be null), m, v: fp32.
void adamw(FType t, void* params, const void* grads, float* master, float* m, float* v,
           const std::vector<AdamwSeg>& segs, const AdamwScalars& k, cudaStream_t s,
           bool zero_moments = false);

}  // namespace remat::kernels
