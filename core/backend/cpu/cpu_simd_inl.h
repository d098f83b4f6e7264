// Per-target helpers of the SIMD kernel files (cpu_simd_kernels.cpp, cpu_simd_activations.cpp):
// fp32/bf16 loads and stores, the element loop, the fixed 16-part row sum, SLEEF's vector
// functions, and the prototypes of the kernels each file defines. Included once per Highway
// target (after hwy/foreach_target.h), inside HWY_BEFORE_NAMESPACE.
#include <sleef.h>

#include <cstdint>

#include "core/backend/cpu/cpu_simd.h"

#if defined(__x86_64__) && !defined(REMAT_CPU_SIMD_SLEEF_DECLS_)
#define REMAT_CPU_SIMD_SLEEF_DECLS_
#include <immintrin.h>
// sleef.h declares its AVX2 and AVX-512 functions only when the whole file is compiled for those
// CPUs; the kernels call them from functions compiled for the target alone. Each declaration
// carries its target, so that the vector is passed in a register as SLEEF expects (clang refuses
// the call otherwise).
#define REMAT_SLEEF_AVX2 __attribute__((target("avx2")))
#define REMAT_SLEEF_AVX512 __attribute__((target("avx512f")))
extern "C" {
REMAT_SLEEF_AVX2 __m256 Sleef_tanhf8_u10avx2(__m256);
REMAT_SLEEF_AVX2 __m256 Sleef_expf8_u10avx2(__m256);
REMAT_SLEEF_AVX2 __m256 Sleef_erff8_u10avx2(__m256);
REMAT_SLEEF_AVX512 __m512 Sleef_tanhf16_u10avx512f(__m512);
REMAT_SLEEF_AVX512 __m512 Sleef_expf16_u10avx512f(__m512);
REMAT_SLEEF_AVX512 __m512 Sleef_erff16_u10avx512f(__m512);
}
#undef REMAT_SLEEF_AVX2
#undef REMAT_SLEEF_AVX512
#endif

#if defined(REMAT_CPU_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef REMAT_CPU_SIMD_INL_H_
#undef REMAT_CPU_SIMD_INL_H_
#else
#define REMAT_CPU_SIMD_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace remat::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using std::int64_t;

// --- loads and stores of fp32 or bf16 (bf16: the upper half of the float, rounded to nearest
// even, NaN kept quiet: the same bits as core/util/bf16.h) ---

template <class D>
HWY_INLINE hn::Vec<D> Ld(D d, Ref r, int64_t i) {
  if (r.bf) {
    const hn::Rebind<std::uint16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    const auto u = hn::PromoteTo(du, hn::LoadU(d16, static_cast<const std::uint16_t*>(r.p) + i));
    return hn::BitCast(d, hn::ShiftLeft<16>(u));
  }
  return hn::LoadU(d, static_cast<const float*>(r.p) + i);
}

template <class D>
HWY_INLINE void St(D d, Ref r, int64_t i, hn::Vec<D> v) {
  if (!r.bf) {
    hn::StoreU(v, d, static_cast<float*>(r.p) + i);
    return;
  }
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const hn::Rebind<std::uint16_t, D> d16;
  const auto u = hn::BitCast(du, v);
  const auto nan = hn::BitCast(di, hn::And(u, hn::Set(du, 0x7fffffffu))) > hn::Set(di, 0x7f800000);
  const auto odd = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(u, hn::Add(hn::Set(du, 0x7fffu), odd)));
  const auto quiet = hn::Or(hn::ShiftRight<16>(u), hn::Set(du, 0x40u));
  const auto bits = hn::IfThenElse(nan, hn::BitCast(di, quiet), hn::BitCast(di, rounded));
  hn::StoreU(hn::DemoteTo(d16, bits), d16, static_cast<std::uint16_t*>(r.p) + i);
}

// dst (+)= v, rounded once.
template <class D>
HWY_INLINE void Put(D d, Ref r, int64_t i, hn::Vec<D> v, bool acc) {
  St(d, r, i, acc ? hn::Add(Ld(d, r, i), v) : v);
}

// The dropout factor: mask ? (mask[i] ? s : 0) : s.
template <class D>
HWY_INLINE hn::Vec<D> MaskFactor(D d, const std::uint8_t* mask, float s, int64_t i) {
  if (!mask) return hn::Set(d, s);
  const hn::Rebind<std::uint8_t, D> d8;
  const hn::RebindToUnsigned<D> du;
  const auto m = hn::PromoteTo(du, hn::LoadU(d8, mask + i));
  return hn::IfThenElseZero(hn::RebindMask(d, m != hn::Zero(du)), hn::Set(d, s));
}

// f(d, i) over [b, e): whole vectors, then one lane at a time.
template <class F>
HWY_INLINE void Each(int64_t b, int64_t e, const F& f) {
  const hn::ScalableTag<float> d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = b;
  for (; i + n <= e; i += n) f(d, i);
  const hn::CappedTag<float, 1> d1;
  for (; i < e; ++i) f(d1, i);
}

// sum over c < H of term(d, c) in 16 partial sums: element c into sum c mod 16, the sums added
// pairwise (p[k] += p[k + w] for w = 8, 4, 2, 1). The same bits for any vector width.
template <class F>
HWY_INLINE float Sum16(int H, const F& term) {
  const hn::ScalableTag<float> d;
  constexpr int kParts = 16;
  const int n = static_cast<int>(hn::Lanes(d));
  const int vecs = kParts / n;  // Lanes is 1, 4, 8 or 16 on x86
  hn::Vec<decltype(d)> acc[kParts];
  for (int k = 0; k < vecs; ++k) acc[k] = hn::Zero(d);
  const int full = H / kParts * kParts;
  for (int c = 0; c < full; c += kParts)
    for (int k = 0; k < vecs; ++k) acc[k] = hn::Add(acc[k], term(d, c + k * n));
  alignas(64) float p[kParts];
  for (int k = 0; k < vecs; ++k) hn::StoreU(acc[k], d, p + k * n);
  const hn::CappedTag<float, 1> d1;
  for (int c = full; c < H; ++c) p[c - full] += hn::GetLane(term(d1, c));
  for (int w = kParts / 2; w >= 1; w /= 2)
    for (int k = 0; k < w; ++k) p[k] += p[k + w];
  return p[0];
}

// sum over k < n of s[k] in 16 partial sums (Sum16), for a row of fp32 in memory.
HWY_INLINE float SumRow(const float* s, int n) {
  return Sum16(n, [&](auto d, int c) HWY_ATTR { return hn::LoadU(d, s + c); });
}

// --- SLEEF's 1-ulp vector functions (u10) at the target's width: AVX-512F, AVX2 or SSE4/SSE2
// builds, or SLEEF's scalar function lane by lane on targets without x86 vectors. A one-lane
// vector (a loop's tail) goes through the full-width function, so a tail rounds as a full
// vector does. ---

#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
#if HWY_TARGET <= HWY_AVX3
#define REMAT_SLEEF(f, v) Sleef_##f##16_u10avx512f(v)
#elif HWY_TARGET == HWY_AVX2
#define REMAT_SLEEF(f, v) Sleef_##f##8_u10avx2(v)
#elif HWY_TARGET == HWY_SSE4
#define REMAT_SLEEF(f, v) Sleef_##f##4_u10sse4(v)
#else
#define REMAT_SLEEF(f, v) Sleef_##f##4_u10sse2(v)
#endif
#define REMAT_SIMD_MATH(Name, f)                                                          \
  template <class D>                                                                      \
  HWY_INLINE hn::Vec<D> Name(D d, hn::Vec<D> v) {                                         \
    const hn::ScalableTag<float> df;                                                      \
    if constexpr (hn::MaxLanes(D()) < hn::MaxLanes(hn::ScalableTag<float>())) {           \
      return hn::Set(d, hn::GetLane(Name(df, hn::Set(df, hn::GetLane(v)))));              \
    } else {                                                                              \
      return hn::Vec<D>{REMAT_SLEEF(f, v.raw)};                                           \
    }                                                                                     \
  }
#else
#define REMAT_SIMD_MATH(Name, f)                                                          \
  template <class D>                                                                      \
  HWY_INLINE hn::Vec<D> Name(D d, hn::Vec<D> v) {                                         \
    float buf[hn::MaxLanes(D())];                                                         \
    hn::StoreU(v, d, buf);                                                                \
    for (float& x : buf) x = Sleef_##f##_u10(x);                                          \
    return hn::LoadU(d, buf);                                                             \
  }
#endif
REMAT_SIMD_MATH(Tanh, tanhf)
REMAT_SIMD_MATH(Exp, expf)
REMAT_SIMD_MATH(Erf, erff)
#undef REMAT_SIMD_MATH
#undef REMAT_SLEEF

// --- kernels defined in cpu_simd_activations.cpp (see cpu_simd.h) ---
void Gelu(Act kind, Ref x, Ref dy, Ref out, int64_t b, int64_t e, bool acc);
void Glu(Act kind, Ref gu, Ref dy, Ref out, int64_t r0, int64_t r1, int F, bool acc);
void RopeHead(Ref in, Ref out, int64_t col, const float* cs, const float* sn, int half, float sign,
              bool acc);
float RowMax(const float* s, int n);
float ExpSum(float* s, int n, float m, const std::uint32_t* bits, std::uint32_t thr, float keep);
float ScaledExpSum(const float* s, int n, float a, float m);
void XentGrad(float* s, int n, int target, float inv, float scale, float cap, float m);
void DivStore(const float* s, int n, float sum, Ref out, int64_t at);
float DotRefs(Ref a, Ref b, int64_t at, int n);
// --- defined in cpu_simd_philox.cpp ---
void DropoutKeep(std::uint64_t first, int64_t n, std::uint32_t c2, std::uint32_t c3,
                 std::uint64_t seed, std::uint32_t thr, std::uint8_t* out);

}  // namespace HWY_NAMESPACE
}  // namespace remat::cpu::simd
HWY_AFTER_NAMESPACE();

#endif  // REMAT_CPU_SIMD_INL_H_
