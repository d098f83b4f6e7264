// The SIMD activation, RoPE, softmax and cross-entropy kernels of cpu_simd.h, compiled once per
// Highway target like cpu_simd_kernels.cpp (whose kKernels lists them). Each keeps the scalar
// reference's expressions operation by operation (core/util/gelu.h, cpu_elementwise.cpp,
// cpu_attention_ref.cpp, cpu_cross_entropy.cpp) with SLEEF's vector tanh, exp and erf; compiled
// without fused multiply-adds.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/backend/cpu/cpu_simd_activations.cpp"
#include "core/backend/cpu/cpu_simd_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/backend/cpu/cpu_simd.h"
#include "core/backend/cpu/cpu_simd_inl.h"
#include "core/util/gelu.h"

HWY_BEFORE_NAMESPACE();
namespace remat::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using std::int64_t;

// --- the activations of core/util/gelu.h and SiLU, value and slope, on vectors ---

template <class D, class V>
HWY_INLINE V GeluTanhArg(D d, V v) {
  return hn::Mul(hn::Set(d, kGeluK0), hn::Add(v, hn::Mul(hn::Mul(hn::Mul(hn::Set(d, kGeluK1), v), v), v)));
}

template <class D, class V>
HWY_INLINE V GeluTanhOf(D d, V v, V t) {
  return hn::Mul(hn::Mul(hn::Set(d, 0.5f), v), hn::Add(hn::Set(d, 1.0f), t));
}

template <class D, class V>
HWY_INLINE V GeluTanhGradOf(D d, V v, V t) {
  const V one = hn::Set(d, 1.0f), half = hn::Set(d, 0.5f);
  const V dt = hn::Mul(hn::Mul(hn::Sub(one, hn::Mul(t, t)), hn::Set(d, kGeluK0)),
                       hn::Add(one, hn::Mul(hn::Mul(hn::Set(d, 3.0f * kGeluK1), v), v)));
  return hn::Add(hn::Mul(half, hn::Add(one, t)), hn::Mul(hn::Mul(half, v), dt));
}

// erf(v / sqrt 2).
template <class D, class V>
HWY_INLINE V ErfArg(D d, V v) {
  return Erf(d, hn::Mul(v, hn::Set(d, kInvSqrt2)));
}

template <class D, class V>
HWY_INLINE V GeluErfOf(D d, V v, V ef) {
  return hn::Mul(hn::Mul(hn::Set(d, 0.5f), v), hn::Add(hn::Set(d, 1.0f), ef));
}

template <class D, class V>
HWY_INLINE V GeluErfGradOf(D d, V v, V ef) {
  const V pdf = Exp(d, hn::Mul(hn::Mul(hn::Set(d, -0.5f), v), v));
  return hn::Add(hn::Mul(hn::Set(d, 0.5f), hn::Add(hn::Set(d, 1.0f), ef)),
                 hn::Mul(hn::Mul(v, hn::Set(d, kInvSqrt2Pi)), pdf));
}

template <class D, class V>
HWY_INLINE V Sigmoid(D d, V g) {
  return hn::Div(hn::Set(d, 1.0f), hn::Add(hn::Set(d, 1.0f), Exp(d, hn::Neg(g))));
}

// --- GELU ---

// The exact GELU and its slope for each of the 65536 bf16 inputs, computed once (on first use)
// by this target's own vector code, so that with bf16 inputs a lookup gives the very bits the
// computation gives (the slope is then multiplied by dy as before).
struct GeluErfTable {
  float value[65536];
  float slope[65536];
};

const GeluErfTable& GeluErfTables() {
  static const GeluErfTable* const table = [] {
    auto* t = new GeluErfTable;
    std::uint16_t* bits = new std::uint16_t[65536];
    for (int k = 0; k < 65536; ++k) bits[k] = static_cast<std::uint16_t>(k);
    const Ref in{bits, true};
    Each(0, 65536, [&](auto d, int64_t i) HWY_ATTR {
      const auto v = Ld(d, in, i);
      const auto ef = ErfArg(d, v);
      hn::StoreU(GeluErfOf(d, v, ef), d, t->value + i);
      hn::StoreU(GeluErfGradOf(d, v, ef), d, t->slope + i);
    });
    delete[] bits;
    return t;
  }();
  return *table;
}

// table[bits of the bf16 x[i + lane]].
template <class D>
HWY_INLINE hn::Vec<D> LookUp(D d, const float* table, Ref x, int64_t i) {
  const hn::Rebind<std::uint16_t, D> d16;
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const auto u = hn::PromoteTo(du, hn::LoadU(d16, static_cast<const std::uint16_t*>(x.p) + i));
  return hn::GatherIndex(d, table, hn::BitCast(di, u));
}

void Gelu(Act kind, Ref x, Ref dy, Ref out, int64_t b, int64_t e, bool acc) {
  if (kind == Act::kGeluErf && x.bf) {
    const GeluErfTable& t = GeluErfTables();
    if (!dy.p)
      return Each(b, e, [&](auto d, int64_t i) HWY_ATTR {
        St(d, out, i, LookUp(d, t.value, x, i));
      });
    return Each(b, e, [&](auto d, int64_t i) HWY_ATTR {
      Put(d, out, i, hn::Mul(Ld(d, dy, i), LookUp(d, t.slope, x, i)), acc);
    });
  }
  if (kind == Act::kGeluErf) {
    if (!dy.p)
      return Each(b, e, [&](auto d, int64_t i) HWY_ATTR {
        const auto v = Ld(d, x, i);
        St(d, out, i, GeluErfOf(d, v, ErfArg(d, v)));
      });
    return Each(b, e, [&](auto d, int64_t i) HWY_ATTR {
      const auto v = Ld(d, x, i);
      Put(d, out, i, hn::Mul(Ld(d, dy, i), GeluErfGradOf(d, v, ErfArg(d, v))), acc);
    });
  }
  if (!dy.p)
    return Each(b, e, [&](auto d, int64_t i) HWY_ATTR {
      const auto v = Ld(d, x, i);
      St(d, out, i, GeluTanhOf(d, v, Tanh(d, GeluTanhArg(d, v))));
    });
  Each(b, e, [&](auto d, int64_t i) HWY_ATTR {
    const auto v = Ld(d, x, i);
    Put(d, out, i, hn::Mul(Ld(d, dy, i), GeluTanhGradOf(d, v, Tanh(d, GeluTanhArg(d, v)))), acc);
  });
}

// --- gated activations: SwiGLU (SiLU gate) and GeGLU (tanh GELU gate) ---

template <bool kSilu>
void GluRows(Ref gu, Ref dy, Ref out, int64_t r0, int64_t r1, int F, bool acc) {
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t g0 = r * 2 * F, u0 = g0 + F, y0 = r * F;
    if (!dy.p) {
      Each(0, F, [&](auto d, int64_t c) HWY_ATTR {
        const auto g = Ld(d, gu, g0 + c), u = Ld(d, gu, u0 + c);
        const auto a = kSilu ? hn::Mul(g, Sigmoid(d, g)) : GeluTanhOf(d, g, Tanh(d, GeluTanhArg(d, g)));
        St(d, out, y0 + c, hn::Mul(a, u));
      });
      continue;
    }
    Each(0, F, [&](auto d, int64_t c) HWY_ATTR {
      const auto g = Ld(d, gu, g0 + c), u = Ld(d, gu, u0 + c);  // both before out (may alias gu)
      const auto dyv = Ld(d, dy, y0 + c);
      const auto du = hn::Mul(dyv, u);
      if constexpr (kSilu) {
        const auto sig = Sigmoid(d, g);
        const auto one = hn::Set(d, 1.0f);
        Put(d, out, g0 + c, hn::Mul(hn::Mul(du, sig), hn::Add(one, hn::Mul(g, hn::Sub(one, sig)))), acc);
        Put(d, out, u0 + c, hn::Mul(dyv, hn::Mul(g, sig)), acc);
      } else {
        const auto t = Tanh(d, GeluTanhArg(d, g));
        Put(d, out, g0 + c, hn::Mul(du, GeluTanhGradOf(d, g, t)), acc);
        Put(d, out, u0 + c, hn::Mul(dyv, GeluTanhOf(d, g, t)), acc);
      }
    });
  }
}

void Glu(Act kind, Ref gu, Ref dy, Ref out, int64_t r0, int64_t r1, int F, bool acc) {
  if (kind == Act::kSilu) return GluRows<true>(gu, dy, out, r0, r1, F, acc);
  GluRows<false>(gu, dy, out, r0, r1, F, acc);
}

// --- RoPE ---

void RopeHead(Ref in, Ref out, int64_t col, const float* cs, const float* sn, int half, float sign,
              bool acc) {
  Each(0, half, [&](auto d, int64_t i) HWY_ATTR {
    const auto x1 = Ld(d, in, col + i), x2 = Ld(d, in, col + i + half);
    const auto c = hn::LoadU(d, cs + i), sv = hn::Mul(hn::Set(d, sign), hn::LoadU(d, sn + i));
    Put(d, out, col + i, hn::Sub(hn::Mul(x1, c), hn::Mul(x2, sv)), acc);
    Put(d, out, col + i + half, hn::Add(hn::Mul(x2, c), hn::Mul(x1, sv)), acc);
  });
}

// --- softmax rows ---

float RowMax(const float* s, int n) {
  const hn::ScalableTag<float> d;
  const int N = static_cast<int>(hn::Lanes(d));
  auto m = hn::Set(d, -std::numeric_limits<float>::infinity());
  int k = 0;
  for (; k + N <= n; k += N) m = hn::Max(m, hn::LoadU(d, s + k));
  float r = hn::GetLane(hn::MaxOfLanes(d, m));
  for (; k < n; ++k) r = std::max(r, s[k]);
  return r;
}

float ExpSum(float* s, int n, float m, const std::uint32_t* bits, std::uint32_t thr, float keep) {
  return Sum16(n, [&](auto d, int c) HWY_ATTR {
    const auto ev = Exp(d, hn::Sub(hn::LoadU(d, s + c), hn::Set(d, m)));
    if (!bits) {
      hn::StoreU(ev, d, s + c);
      return ev;
    }
    // bits[c] < thr (dropped), compared as signed after flipping the sign bits
    const hn::RebindToSigned<decltype(d)> di;
    const hn::Rebind<std::uint32_t, decltype(d)> du;
    const auto flip = hn::Set(du, 0x80000000u);
    const auto b = hn::BitCast(di, hn::Xor(hn::LoadU(du, bits + c), flip));
    const auto dropped = hn::BitCast(di, hn::Xor(hn::Set(du, thr), flip)) > b;
    hn::StoreU(hn::IfThenZeroElse(hn::RebindMask(d, dropped), hn::Mul(ev, hn::Set(d, keep))), d, s + c);
    return ev;
  });
}

float ScaledExpSum(const float* s, int n, float a, float m) {
  return Sum16(n, [&](auto d, int c) HWY_ATTR {
    return Exp(d, hn::Sub(hn::Mul(hn::LoadU(d, s + c), hn::Set(d, a)), hn::Set(d, m)));
  });
}

// --- cross-entropy rows ---

void XentGrad(float* s, int n, int target, float inv, float scale, float cap, float m) {
  Each(0, n, [&](auto d, int64_t k) HWY_ATTR {
    const hn::RebindToSigned<decltype(d)> di;
    const auto v = hn::LoadU(d, s + k);
    const auto e = cap > 0.0f ? Exp(d, hn::Sub(hn::Mul(v, hn::Set(d, cap)), hn::Set(d, m))) : v;
    const auto hot = hn::RebindMask(d, hn::Eq(hn::Iota(di, static_cast<int>(k)), hn::Set(di, target)));
    const auto p = hn::Mul(e, hn::Set(d, inv));
    auto g = hn::Mul(hn::IfThenElse(hot, hn::Sub(p, hn::Set(d, 1.0f)), p), hn::Set(d, scale));
    if (cap > 0.0f) g = hn::Mul(g, hn::Sub(hn::Set(d, 1.0f), hn::Mul(v, v)));
    hn::StoreU(g, d, s + k);
  });
}

void DivStore(const float* s, int n, float sum, Ref out, int64_t at) {
  Each(0, n, [&](auto d, int64_t k) HWY_ATTR {
    St(d, out, at + k, hn::Div(hn::LoadU(d, s + k), hn::Set(d, sum)));
  });
}

float DotRefs(Ref a, Ref b, int64_t at, int n) {
  return Sum16(n, [&](auto d, int c) HWY_ATTR { return hn::Mul(Ld(d, a, at + c), Ld(d, b, at + c)); });
}

}  // namespace HWY_NAMESPACE
}  // namespace remat::cpu::simd
HWY_AFTER_NAMESPACE();
