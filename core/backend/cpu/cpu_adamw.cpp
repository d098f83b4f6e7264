// AdamW with PyTorch's semantics (torch.optim.AdamW, single-tensor path): decoupled weight
// decay p *= 1 - lr * wd, m = lerp(m, g, 1 - beta1), v = beta2 v + (1 - beta2) g^2,
// p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps). Updates the fp32 master
// when there is one and rounds it into the parameters. With args.zero_moments, m and v are
// taken as zeros and not read (the first step: each page of the moments is first touched by a
// write), with the same arithmetic on those zeros.
#include <algorithm>
#include <cmath>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"

namespace remat {

using cpu::FV;

void CpuBackend::adamw(const Tensor& params, const Tensor& grads, const Tensor* master,
                       const Tensor& m, const Tensor& v, const std::vector<AdamSegment>& segs,
                       const AdamArgs& args) {
  const char* op = "adamw";
  std::int64_t end = 0;
  for (const AdamSegment& s : segs) {
    if (s.offset < 0 || s.numel < 0)
      throw Error("cpu adamw: segment at " + std::to_string(s.offset) + " of " +
                  std::to_string(s.numel) + " elements is invalid");
    end = std::max(end, s.offset + s.numel);
  }
  cpu::check_float(params, op, "params", end);
  cpu::check_float(grads, op, "grads", end);
  cpu::check_dtype(m, DType::F32, op, "m", end);
  cpu::check_dtype(v, DType::F32, op, "v", end);
  const bool has_master = master && *master;
  if (has_master) cpu::check_dtype(*master, DType::F32, op, "master", end);
  else if (params.dtype != DType::F32)
    throw Error("cpu adamw: bf16 parameters need an fp32 master");
  if (args.t < 1) throw Error("cpu adamw: step count t must be >= 1");

  const double bc1 = 1.0 - std::pow(static_cast<double>(args.beta1), args.t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(args.beta2), args.t);
  const float step_size = static_cast<float>(static_cast<double>(args.lr) / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float decay =
      static_cast<float>(1.0 - static_cast<double>(args.lr) * args.weight_decay);
  const float w1 = 1.0f - args.beta1, b2 = args.beta2, w2 = 1.0f - args.beta2, eps = args.eps;

  FV pv(params), gv(grads);
  float* mp = m.as<float>();
  float* vp = v.as<float>();
  float* master_p = has_master ? master->as<float>() : params.as<float>();
  const cpu::simd::Kernels* kern = cpu::simd::active();
  for (const AdamSegment& s : segs) {
    const bool dec = s.decay;
    const bool zero = args.zero_moments;
    const cpu::simd::AdamConsts kc{decay, w1, b2, w2, eps, bc2_sqrt, step_size, dec, zero};
    cpu::parallel_for(*pool_, s.numel, 1 << 15, [&](std::int64_t b, std::int64_t e, int) {
      if (kern)
        return kern->adamw(gv.ref(), master_p, mp, vp, has_master ? pv.ref() : cpu::simd::Ref{},
                           s.offset + b, s.offset + e, kc);
      for (std::int64_t k = b; k < e; ++k) {
        const std::int64_t i = s.offset + k;
        const float g = gv[i];
        float p = master_p[i];
        if (dec) p *= decay;
        const float m0 = zero ? 0.0f : mp[i], v0 = zero ? 0.0f : vp[i];
        const float mi = m0 + w1 * (g - m0);
        const float vi = v0 * b2 + w2 * (g * g);
        mp[i] = mi;
        vp[i] = vi;
        const float denom = std::sqrt(vi) / bc2_sqrt + eps;
        p = p - step_size * (mi / denom);
        master_p[i] = p;
        if (has_master) pv.set(i, p);
      }
    });
  }
}

}  // namespace remat
