// The SIMD kernel sets of cpu_simd.h, one per Highway target: this file is compiled once for each
// (hwy/foreach_target.h) and each pass defines kKernels in its target's namespace; the activation,
// RoPE and softmax kernels it lists are in cpu_simd_activations.cpp, the dropout mask's in
// cpu_simd_philox.cpp. Every loop runs whole
// vectors, then the remaining elements one lane at a time through the same code, so a tail
// rounds as a full vector does. Compiled without fused multiply-adds (core/CMakeLists.txt).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/backend/cpu/cpu_simd_kernels.cpp"
#include "core/backend/cpu/cpu_simd_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>
#include <cstdint>

#include "core/backend/cpu/cpu_simd.h"
#include "core/backend/cpu/cpu_simd_inl.h"

HWY_BEFORE_NAMESPACE();
namespace remat::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using std::int64_t;

// --- element-wise ---

void Copy(Ref src, Ref dst, int64_t b, int64_t e, bool acc) {
  Each(b, e, [&](auto d, int64_t i) HWY_ATTR { Put(d, dst, i, Ld(d, src, i), acc); });
}

void ScaleMask(Ref x, const std::uint8_t* mask, float s, Ref dst, int64_t b, int64_t e,
               bool acc) {
  Each(b, e, [&](auto d, int64_t i) HWY_ATTR {
    Put(d, dst, i, hn::Mul(Ld(d, x, i), MaskFactor(d, mask, s, i)), acc);
  });
}

void ResidualFwd(Ref res, Ref x, const std::uint8_t* mask, float s, Ref out, int64_t b,
                 int64_t e) {
  Each(b, e, [&](auto d, int64_t i) HWY_ATTR {
    St(d, out, i, hn::Add(Ld(d, res, i), hn::Mul(Ld(d, x, i), MaskFactor(d, mask, s, i))));
  });
}

void ResidualBwd(Ref dout, const std::uint8_t* mask, float s, Ref dres, Ref dx, int64_t b,
                 int64_t e, bool acc_res, bool acc_x) {
  Each(b, e, [&](auto d, int64_t i) HWY_ATTR {
    const auto g = Ld(d, dout, i);  // read before either write: dres or dx may alias dout
    Put(d, dx, i, hn::Mul(g, MaskFactor(d, mask, s, i)), acc_x);
    Put(d, dres, i, g, acc_res);
  });
}

void AdamW(Ref grads, float* master, float* m, float* v, Ref params, int64_t b, int64_t e,
           const AdamConsts& k) {
  Each(b, e, [&](auto d, int64_t i) HWY_ATTR {
    const auto g = Ld(d, grads, i);
    auto p = hn::LoadU(d, master + i);
    if (k.apply_decay) p = hn::Mul(p, hn::Set(d, k.decay));
    const auto m0 = k.zero_moments ? hn::Zero(d) : hn::LoadU(d, m + i);
    const auto v0 = k.zero_moments ? hn::Zero(d) : hn::LoadU(d, v + i);
    const auto mi = hn::Add(m0, hn::Mul(hn::Set(d, k.w1), hn::Sub(g, m0)));
    const auto vi = hn::Add(hn::Mul(v0, hn::Set(d, k.b2)), hn::Mul(hn::Set(d, k.w2), hn::Mul(g, g)));
    hn::StoreU(mi, d, m + i);
    hn::StoreU(vi, d, v + i);
    const auto denom = hn::Add(hn::Div(hn::Sqrt(vi), hn::Set(d, k.bc2_sqrt)), hn::Set(d, k.eps));
    p = hn::Sub(p, hn::Mul(hn::Set(d, k.step_size), hn::Div(mi, denom)));
    hn::StoreU(p, d, master + i);
    if (params.p) St(d, params, i, p);
  });
}

// --- norm rows (the scalar statistics as the reference computes them from the sums) ---

void LnFwdRow(Ref x, Ref w, Ref bias, Ref y, int64_t base, int H, float eps) {
  const float fH = static_cast<float>(H);
  const float mean = Sum16(H, [&](auto d, int c) HWY_ATTR { return Ld(d, x, base + c); }) / fH;
  const float var = Sum16(H, [&](auto d, int c) HWY_ATTR {
    const auto t = hn::Sub(Ld(d, x, base + c), hn::Set(d, mean));
    return hn::Mul(t, t);
  });
  const float rstd = 1.0f / std::sqrt(var / fH + eps);
  Each(0, H, [&](auto d, int64_t c) HWY_ATTR {
    auto v = hn::Mul(hn::Mul(hn::Sub(Ld(d, x, base + c), hn::Set(d, mean)), hn::Set(d, rstd)),
                     Ld(d, w, c));
    if (bias.p) v = hn::Add(v, Ld(d, bias, c));
    St(d, y, base + c, v);
  });
}

void LnBwdRow(Ref x, Ref w, Ref dy, Ref dx, int64_t base, int H, float eps, bool acc,
              float* stats) {
  const float fH = static_cast<float>(H), invH = 1.0f / fH;
  const float mean = Sum16(H, [&](auto d, int c) HWY_ATTR { return Ld(d, x, base + c); }) / fH;
  const float var = Sum16(H, [&](auto d, int c) HWY_ATTR {
    const auto t = hn::Sub(Ld(d, x, base + c), hn::Set(d, mean));
    return hn::Mul(t, t);
  });
  const float rstd = 1.0f / std::sqrt(var / fH + eps);
  stats[0] = mean;
  stats[1] = rstd;
  auto g_of = [&](auto d, int64_t c) HWY_ATTR { return hn::Mul(Ld(d, dy, base + c), Ld(d, w, c)); };
  auto xhat_of = [&](auto d, int64_t c) HWY_ATTR {
    return hn::Mul(hn::Sub(Ld(d, x, base + c), hn::Set(d, mean)), hn::Set(d, rstd));
  };
  const float mg = Sum16(H, g_of) * invH;
  const float mgx =
      Sum16(H, [&](auto d, int c) HWY_ATTR { return hn::Mul(g_of(d, c), xhat_of(d, c)); }) * invH;
  Each(0, H, [&](auto d, int64_t c) HWY_ATTR {
    const auto t = hn::Sub(hn::Sub(g_of(d, c), hn::Set(d, mg)), hn::Mul(xhat_of(d, c), hn::Set(d, mgx)));
    Put(d, dx, base + c, hn::Mul(hn::Set(d, rstd), t), acc);
  });
}

float RmsRstd(Ref x, int64_t base, int H, float eps) {
  const float s = Sum16(H, [&](auto d, int c) HWY_ATTR {
    const auto v = Ld(d, x, base + c);
    return hn::Mul(v, v);
  });
  return 1.0f / std::sqrt(s / static_cast<float>(H) + eps);
}

void RmsFwdRow(Ref x, Ref w, Ref y, int64_t base, int H, float eps, float off) {
  const float rstd = RmsRstd(x, base, H, eps);
  Each(0, H, [&](auto d, int64_t c) HWY_ATTR {
    const auto wt = hn::Add(hn::Set(d, off), Ld(d, w, c));
    St(d, y, base + c, hn::Mul(hn::Mul(Ld(d, x, base + c), hn::Set(d, rstd)), wt));
  });
}

void RmsBwdRow(Ref x, Ref w, Ref dy, Ref dx, int64_t base, int H, float eps, bool acc, float off,
               float* stats) {
  const float rstd = RmsRstd(x, base, H, eps);
  stats[0] = 0.0f;
  stats[1] = rstd;
  auto gw = [&](auto d, int64_t c) HWY_ATTR {
    return hn::Mul(Ld(d, dy, base + c), hn::Add(hn::Set(d, off), Ld(d, w, c)));
  };
  auto xhat = [&](auto d, int64_t c) HWY_ATTR { return hn::Mul(Ld(d, x, base + c), hn::Set(d, rstd)); };
  const float mgx = Sum16(H, [&](auto d, int c) HWY_ATTR { return hn::Mul(gw(d, c), xhat(d, c)); }) *
                    (1.0f / static_cast<float>(H));
  Each(0, H, [&](auto d, int64_t c) HWY_ATTR {
    const auto t = hn::Sub(gw(d, c), hn::Mul(xhat(d, c), hn::Set(d, mgx)));
    Put(d, dx, base + c, hn::Mul(hn::Set(d, rstd), t), acc);
  });
}

void NormParamCols(Ref x, Ref dy, const float* stats, int64_t rows, int64_t ld, int64_t off, int c0,
                   int nc, float* aw, float* ab) {
  for (int64_t r = 0; r < rows; ++r) {
    const float mean = stats[2 * r], rstd = stats[2 * r + 1];
    const int64_t base = r * ld + off + c0;
    Each(0, nc, [&](auto d, int64_t c) HWY_ATTR {
      const auto g = Ld(d, dy, base + c);
      const auto xh = hn::Mul(hn::Sub(Ld(d, x, base + c), hn::Set(d, mean)), hn::Set(d, rstd));
      hn::StoreU(hn::Add(hn::LoadU(d, aw + c), hn::Mul(g, xh)), d, aw + c);
      if (ab) hn::StoreU(hn::Add(hn::LoadU(d, ab + c), g), d, ab + c);
    });
  }
}

extern const Kernels kKernels;
// Highway's one-lane target is named ONE_LANE here: "scalar" is the reference loops.
const Kernels kKernels = {HWY_TARGET == HWY_SCALAR ? "ONE_LANE" : hwy::TargetName(HWY_TARGET), HWY_TARGET, &Copy, &ScaleMask,
                          &ResidualFwd, &ResidualBwd, &AdamW, &LnFwdRow, &LnBwdRow, &RmsFwdRow,
                          &RmsBwdRow, &NormParamCols, &Gelu, &Glu, &RopeHead, &RowMax,
                          &ExpSum, &ScaledExpSum, &XentGrad, &DivStore, &DotRefs,
                          &DropoutKeep};

}  // namespace HWY_NAMESPACE
}  // namespace remat::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace remat::cpu::simd {

// Every compiled set, in Highway's order (best first; nullptr where a target was not compiled).
extern const Kernels* const kCompiledSets[];
extern const int kCompiledSetCount;
const Kernels* const kCompiledSets[] = {HWY_CHOOSE_TARGET_LIST(kKernels),
                                        HWY_CHOOSE_FALLBACK(kKernels)};
const int kCompiledSetCount = sizeof(kCompiledSets) / sizeof(kCompiledSets[0]);

}  // namespace remat::cpu::simd
#endif
