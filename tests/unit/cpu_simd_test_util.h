// Helpers of the SIMD kernel tests: runs of one computation with the scalar reference and each
// kernel set this CPU runs, and distances between their outputs.
#pragma once
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/cpu/cpu_simd.h"
#include "core/util/bf16.h"
#include "tests/unit/cpu_test_util.h"

namespace remat::simdtest {

namespace simd = cpu::simd;
using cputest::randv;

// Restores the active set at the end of a test.
struct ActiveGuard {
  const simd::Kernels* saved = simd::active();
  ~ActiveGuard() { simd::set_active(saved); }
};

// The outputs of `run` (their raw bytes) with the reference, then with each available set.
using Outputs = std::vector<std::vector<std::uint8_t>>;
template <class F>
inline std::vector<std::pair<std::string, Outputs>> per_set(F&& run) {
  ActiveGuard g;
  std::vector<std::pair<std::string, Outputs>> out;
  simd::set_active(nullptr);
  out.emplace_back("scalar", run());
  for (const simd::Kernels* k : simd::available()) {
    simd::set_active(k);
    out.emplace_back(k->name, run());
  }
  return out;
}

// Values that exercise rounding: random, exact bf16 halfway cases, signed zeros, infinities,
// NaN, subnormals, the largest floats.
inline std::vector<float> awkward(std::size_t n, std::uint32_t seed) {
  std::vector<float> v = randv(n, seed, -4.0f, 4.0f);
  const float inf = std::numeric_limits<float>::infinity();
  const float special[] = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                           1e-40f, -1e-41f, FLT_MAX, -FLT_MAX, 1.00390625f /* bf16 tie */,
                           1.01171875f, -3.0078125f};
  for (std::size_t k = 0; k < sizeof special / sizeof special[0] && k * 7 < n; ++k)
    v[k * 7] = special[k];
  return v;
}

inline void expect_same_bytes(const std::vector<std::pair<std::string, Outputs>>& r, const char* what) {
  ASSERT_GE(r.size(), 2u) << "no SIMD set runs on this CPU";
  for (std::size_t s = 1; s < r.size(); ++s)
    for (std::size_t t = 0; t < r[0].second.size(); ++t)
      EXPECT_TRUE(r[s].second[t] == r[0].second[t])
          << what << ": output " << t << " of " << r[s].first << " differs from the reference";
}

inline std::vector<float> as_floats(const std::vector<std::uint8_t>& b, bool bf) {
  std::vector<float> v(b.size() / (bf ? 2 : 4));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (bf) {
      std::uint16_t h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      v[i] = bf16_to_float(h);
    } else {
      std::memcpy(&v[i], b.data() + 4 * i, 4);
    }
  }
  return v;
}

// Largest |got - ref| over rows of H, in units of the float epsilon times the row's largest
// |ref| (a relative bound that a near-zero element cannot blow up).
inline double row_ulps(const std::vector<float>& got, const std::vector<float>& ref, int H) {
  double worst = 0.0;
  for (std::size_t r0 = 0; r0 < ref.size(); r0 += H) {
    double scale = 0.0;
    for (std::size_t i = r0; i < r0 + H && i < ref.size(); ++i) scale = std::max(scale, std::fabs(double(ref[i])));
    if (scale == 0.0) scale = 1.0;
    for (std::size_t i = r0; i < r0 + H && i < ref.size(); ++i)
      worst = std::max(worst, std::fabs(double(got[i]) - ref[i]) / (FLT_EPSILON * scale));
  }
  return worst;
}

// Largest |got - ref| / (eps * max(|ref|, floor)) over elements (eps: FLT_EPSILON for fp32
// outputs, 2^-7 for bf16 ones); infinite where a non-finite ref is not matched exactly (NaN by
// NaN, an infinity by itself) or a finite ref by a non-finite value.
inline double elem_ulps(const std::vector<float>& got, const std::vector<float>& ref, double floor,
                        double eps = FLT_EPSILON) {
  double worst = 0.0;
  const double inf = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ref[i]) || !std::isfinite(got[i])) {
      const bool same = std::isnan(ref[i]) ? std::isnan(got[i]) : got[i] == ref[i];
      if (!same) return inf;
      continue;
    }
    const double d = std::fabs(double(got[i]) - ref[i]) / (eps * std::max(std::fabs(double(ref[i])), floor));
    worst = std::max(worst, d);
  }
  return worst;
}

}  // namespace remat::simdtest
