// The initial weights' Box-Muller values sixteen Philox blocks at a time with AVX-512, bit for bit
// those of the scalar loop in weight_init.cpp (called only where the CPU has AVX-512F: see
// weight_init_simd.h). The scalar loop calls glibc's logf and sincosf; on a CPU with FMA glibc
// runs their FMA builds, whose double-precision arithmetic (the 16-entry log table and its
// polynomial; the pi/2 reduction and the two polynomials of sine and cosine, from Arm's optimized
// routines, MIT licensed) is repeated here lane by lane with the same fused multiply-adds, so
// every rounding is the same. The float steps around them (the uniforms, -2 log, sqrt, the
// products) are single IEEE operations done in the same order. Compiled with -ffp-contract=off
// (core/CMakeLists.txt): nothing is fused but what is written as a fused multiply-add.
// WeightInit tests compare these functions with glibc's on every input the initialization can
// give them, and the whole values with the scalar definition.
#include "core/engine/weight_init_simd.h"

#include <immintrin.h>

#include <cstdint>

namespace remat::weight_simd {
namespace {

#define REMAT_AVX512 __attribute__((target("avx512f,avx2,fma")))

// log: 1/c and log c for the 16 subintervals of [0x3f330000, 2 * 0x3f330000) (as bits), ln 2 and
// the polynomial of log1p (its first coefficient 1).
alignas(64) constexpr double kInvC[16] = {
    0x1.661ec79f8f3bep+0, 0x1.571ed4aaf883dp+0, 0x1.49539f0f010bp+0,  0x1.3c995b0b80385p+0,
    0x1.30d190c8864a5p+0, 0x1.25e227b0b8eap+0,  0x1.1bb4a4a1a343fp+0, 0x1.12358f08ae5bap+0,
    0x1.0953f419900a7p+0, 0x1p+0,               0x1.e608cfd9a47acp-1, 0x1.ca4b31f026aap-1,
    0x1.b2036576afce6p-1, 0x1.9c2d163a1aa2dp-1, 0x1.886e6037841edp-1, 0x1.767dcf5534862p-1};
alignas(64) constexpr double kLogC[16] = {
    -0x1.57bf7808caadep-2, -0x1.2bef0a7c06ddbp-2, -0x1.01eae7f513a67p-2, -0x1.b31d8a68224e9p-3,
    -0x1.6574f0ac07758p-3, -0x1.1aa2bc79c81p-3,   -0x1.a4e76ce8c0e5ep-4, -0x1.1973c5a611cccp-4,
    -0x1.252f438e10c1ep-5, 0x0p+0,                0x1.aa5aa5df25984p-5,  0x1.c5e53aa362eb4p-4,
    0x1.526e57720db08p-3,  0x1.bc2860d22477p-3,   0x1.1058bc8a07ee1p-2,  0x1.4043057b6ee09p-2};
constexpr double kLn2 = 0x1.62e42fefa39efp-1;
constexpr double kA0 = -0x1.00ea348b88334p-2, kA1 = 0x1.5575b0be00b6ap-2,
                 kA2 = -0x1.ffffef20a4123p-2;

// sin and cos: 2/pi scaled by 2^24 (the quadrant lands in bits 24..31), pi/2, the cosine's
// coefficients c0..c4 (negated in quadrants 2 and 3) and the sine's s1..s3.
constexpr double kHpiInv = 0x1.45F306DC9C883p+23, kHpi = 0x1.921FB54442D18p0;
constexpr double kC0 = 0x1p0, kC1 = -0x1.ffffffd0c621cp-2, kC2 = 0x1.55553e1068f19p-5,
                 kC3 = -0x1.6c087e89a359dp-10, kC4 = 0x1.99343027bf8c3p-16;
constexpr double kS1 = -0x1.555545995a603p-3, kS2 = 0x1.1107605230bc4p-7,
                 kS3 = -0x1.994eb3774cf24p-13;

REMAT_AVX512 inline __m512d lo_pd(__m512 x) { return _mm512_cvtps_pd(_mm512_castps512_ps256(x)); }
REMAT_AVX512 inline __m512d hi_pd(__m512 x) {
  return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
}
REMAT_AVX512 inline __m512 join_ps(__m512d lo, __m512d hi) {
  const __m256 l = _mm512_cvtpd_ps(lo), h = _mm512_cvtpd_ps(hi);
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(l)),
                                             _mm256_castps_pd(h), 1));
}

// log of eight values (their float bits' parts already split).
REMAT_AVX512 inline __m512d log8(__m512d z, __m256i i, __m256i k) {
  const __m512i idx = _mm512_cvtepu32_epi64(i);
  const __m512d invc = _mm512_permutex2var_pd(_mm512_load_pd(kInvC), idx, _mm512_load_pd(kInvC + 8));
  const __m512d logc = _mm512_permutex2var_pd(_mm512_load_pd(kLogC), idx, _mm512_load_pd(kLogC + 8));
  const __m512d r = _mm512_fmadd_pd(z, invc, _mm512_set1_pd(-1.0));
  const __m512d y0 = _mm512_fmadd_pd(_mm512_cvtepi32_pd(k), _mm512_set1_pd(kLn2), logc);
  const __m512d r2 = _mm512_mul_pd(r, r);
  __m512d y = _mm512_fmadd_pd(_mm512_set1_pd(kA1), r, _mm512_set1_pd(kA2));
  y = _mm512_fmadd_pd(_mm512_set1_pd(kA0), r2, y);
  return _mm512_fmadd_pd(y, r2, _mm512_add_pd(y0, r));
}

// logf of 16 positive normal floats.
REMAT_AVX512 __m512 logf16(__m512 x) {
  const __m512i ix = _mm512_castps_si512(x);
  const __m512i tmp = _mm512_sub_epi32(ix, _mm512_set1_epi32(0x3f330000));
  const __m512i i = _mm512_and_si512(_mm512_srli_epi32(tmp, 19), _mm512_set1_epi32(15));
  const __m512i k = _mm512_srai_epi32(tmp, 23);
  const __m512i iz = _mm512_sub_epi32(ix, _mm512_and_si512(tmp, _mm512_set1_epi32(static_cast<int>(0xff800000u))));
  const __m512 z = _mm512_castsi512_ps(iz);
  const __m512d ylo = log8(lo_pd(z), _mm512_castsi512_si256(i), _mm512_castsi512_si256(k));
  const __m512d yhi = log8(hi_pd(z), _mm512_extracti64x4_epi64(i, 1), _mm512_extracti64x4_epi64(k, 1));
  const __mmask16 one = _mm512_cmpeq_epi32_mask(ix, _mm512_set1_epi32(0x3f800000));
  return _mm512_mask_blend_ps(one, join_ps(ylo, yhi), _mm512_setzero_ps());
}

// sin and cos of eight values in [0, 120) (the tiny ones are handled by the caller).
REMAT_AVX512 inline void sincos8(__m512d x, __m512d& sin_out, __m512d& cos_out) {
  const __m256i ri = _mm512_cvttpd_epi32(_mm512_mul_pd(x, _mm512_set1_pd(kHpiInv)));
  const __m256i n = _mm256_srai_epi32(_mm256_add_epi32(ri, _mm256_set1_epi32(0x800000)), 24);
  const __m512d xr = _mm512_fnmadd_pd(_mm512_cvtepi32_pd(n), _mm512_set1_pd(kHpi), x);
  const __m512i n64 = _mm512_cvtepi32_epi64(n);
  const __m512i q = _mm512_and_si512(n64, _mm512_set1_epi64(3));
  // The sine's sign is negative in quadrants 1 and 2; the cosine's polynomial in 2 and 3.
  const __mmask8 neg_x = _mm512_cmpeq_epi64_mask(q, _mm512_set1_epi64(1)) |
                         _mm512_cmpeq_epi64_mask(q, _mm512_set1_epi64(2));
  const __mmask8 neg_c = _mm512_test_epi64_mask(n64, _mm512_set1_epi64(2));
  const __mmask8 odd = _mm512_test_epi64_mask(n64, _mm512_set1_epi64(1));
  const __m512d xs = _mm512_mul_pd(xr, _mm512_mask_blend_pd(neg_x, _mm512_set1_pd(1.0), _mm512_set1_pd(-1.0)));
  auto coef = [&](double c) REMAT_AVX512 {
    return _mm512_mask_blend_pd(neg_c, _mm512_set1_pd(c), _mm512_set1_pd(-c));
  };
  const __m512d x2 = _mm512_mul_pd(xr, xr);
  const __m512d x4 = _mm512_mul_pd(x2, x2), x3 = _mm512_mul_pd(x2, xs);
  const __m512d c2 = _mm512_fmadd_pd(x2, coef(kC4), coef(kC3));
  const __m512d s1 = _mm512_fmadd_pd(x2, _mm512_set1_pd(kS3), _mm512_set1_pd(kS2));
  const __m512d c1 = _mm512_fmadd_pd(x2, coef(kC1), coef(kC0));
  const __m512d x5 = _mm512_mul_pd(x3, x2), x6 = _mm512_mul_pd(x4, x2);
  const __m512d s = _mm512_fmadd_pd(x3, _mm512_set1_pd(kS1), xs);
  const __m512d c = _mm512_fmadd_pd(x4, coef(kC2), c1);
  const __m512d sp = _mm512_fmadd_pd(x5, s1, s), cp = _mm512_fmadd_pd(x6, c2, c);
  sin_out = _mm512_mask_blend_pd(odd, sp, cp);  // odd quadrants swap the two
  cos_out = _mm512_mask_blend_pd(odd, cp, sp);
}

REMAT_AVX512 void sincosf16(__m512 y, __m512& s, __m512& c) {
  __m512d slo, clo, shi, chi;
  sincos8(lo_pd(y), slo, clo);
  sincos8(hi_pd(y), shi, chi);
  s = join_ps(slo, shi);
  c = join_ps(clo, chi);
  // |y| < 2^-12: sin y = y, cos y = 1.
  const __m512i top = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(y), 20), _mm512_set1_epi32(0x7ff));
  const __mmask16 tiny = _mm512_cmplt_epi32_mask(top, _mm512_set1_epi32(0x39800000 >> 20));
  s = _mm512_mask_blend_ps(tiny, s, y);
  c = _mm512_mask_blend_ps(tiny, c, _mm512_set1_ps(1.0f));
}

// hi and lo of 16 32x32-bit products m * x.
REMAT_AVX512 inline void mulhilo16(__m512i m, __m512i x, __m512i& hi, __m512i& lo) {
  const __m512i even = _mm512_mul_epu32(x, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), m);
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  lo = _mm512_mullo_epi32(x, m);
}

}  // namespace

REMAT_AVX512 void log16(const float* in, float* out) {
  _mm512_storeu_ps(out, logf16(_mm512_loadu_ps(in)));
}

REMAT_AVX512 void sincos16(const float* in, float* sin_out, float* cos_out) {
  __m512 s, c;
  sincosf16(_mm512_loadu_ps(in), s, c);
  _mm512_storeu_ps(sin_out, s);
  _mm512_storeu_ps(cos_out, c);
}

REMAT_AVX512 void normal_blocks16(const DropoutKey& key, float stddev, std::uint64_t group,
                                  float* out) {
  alignas(64) std::uint32_t lo[16], hi[16];
  for (int j = 0; j < 16; ++j) {
    const std::uint64_t g = group + static_cast<std::uint64_t>(j);
    lo[j] = static_cast<std::uint32_t>(g);
    hi[j] = static_cast<std::uint32_t>(g >> 32);
  }
  // Philox4x32-10 of philox_block (core/util/philox.h), one block a lane.
  __m512i c0 = _mm512_load_si512(lo), c1 = _mm512_load_si512(hi);
  __m512i c2 = _mm512_set1_epi32(static_cast<int>(key.step));
  __m512i c3 = _mm512_set1_epi32(static_cast<int>((key.block << 8) ^ key.site));
  std::uint32_t k0 = static_cast<std::uint32_t>(key.seed), k1 = static_cast<std::uint32_t>(key.seed >> 32);
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(0xCD9E8D57u));
  for (int r = 0; r < 10; ++r) {
    __m512i hi0, lo0, hi1, lo1;
    mulhilo16(m0, c0, hi0, lo0);
    mulhilo16(m1, c2, hi1, lo1);
    c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(static_cast<int>(k0)));
    c1 = lo1;
    c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(static_cast<int>(k1)));
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // Box-Muller on (v0, v1) and (v2, v3): cos to the even element, sin to the odd one.
  alignas(64) float v[4][16];
  const __m512 scale = _mm512_set1_ps(4294967296.0f), sd = _mm512_set1_ps(stddev);
  const __m512i words[2][2] = {{c0, c1}, {c2, c3}};
  for (int p = 0; p < 2; ++p) {
    const __m512 u1 = _mm512_div_ps(_mm512_add_ps(_mm512_cvtepu32_ps(words[p][0]), _mm512_set1_ps(1.0f)), scale);
    const __m512 u2 = _mm512_div_ps(_mm512_cvtepu32_ps(words[p][1]), scale);
    const __m512 rad = _mm512_sqrt_ps(_mm512_mul_ps(_mm512_set1_ps(-2.0f), logf16(u1)));
    __m512 s, c;
    sincosf16(_mm512_mul_ps(_mm512_set1_ps(6.2831853f), u2), s, c);
    const __m512 sr = _mm512_mul_ps(sd, rad);
    _mm512_store_ps(v[2 * p], _mm512_mul_ps(sr, c));
    _mm512_store_ps(v[2 * p + 1], _mm512_mul_ps(sr, s));
  }
  for (int j = 0; j < 16; ++j) {
    out[4 * j] = v[0][j];
    out[4 * j + 1] = v[1][j];
    out[4 * j + 2] = v[2][j];
    out[4 * j + 3] = v[3][j];
  }
}

}  // namespace remat::weight_simd
