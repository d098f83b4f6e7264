// The exact GELU on bf16 inputs reads a table of every bf16 input's value and slope: for each
// kernel set, the bytes equal those of the same inputs given as fp32 (computed, not looked up;
// NaN payloads aside), for every one of the 65536 bf16 patterns (NaNs, infinities, subnormals included), forward and
// backward, storing and accumulating, into fp32 and bf16 outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/backend/cpu/cpu_simd.h"
#include "core/util/bf16.h"
#include "tests/unit/cpu_test_util.h"

namespace remat {
namespace {

namespace simd = cpu::simd;

TEST(CpuSimdGeluTable, Bf16LookUpGivesTheComputedBits) {
  const std::int64_t n = 65536;
  std::vector<std::uint16_t> xb(n), dyb(n);
  std::vector<float> xf(n);
  const std::vector<float> dyv = cputest::randv(n, 401, -3, 3);
  for (std::int64_t i = 0; i < n; ++i) {
    xb[i] = static_cast<std::uint16_t>(i);
    xf[i] = bf16_to_float(xb[i]);
    dyb[i] = float_to_bf16(dyv[i]);
  }
  const auto kinds = simd::available();
  ASSERT_FALSE(kinds.empty()) << "no SIMD set runs on this CPU";
  for (const simd::Kernels* k : kinds) {
    SCOPED_TRACE(k->name);
    for (bool out_bf : {false, true})
      for (int mode = 0; mode < 3; ++mode) {  // forward, backward storing, backward adding
        SCOPED_TRACE("out " + std::string(out_bf ? "bf16" : "fp32") + " mode " + std::to_string(mode));
        const std::size_t w = out_bf ? 2 : 4;
        std::vector<std::uint8_t> a(n * w), b(n * w);
        for (std::int64_t i = 0; i < n; ++i) {  // the same starting values for the adding mode
          const float v = dyv[(i * 7) % n];
          if (out_bf) {
            const std::uint16_t h = float_to_bf16(v);
            std::memcpy(&a[i * 2], &h, 2);
          } else {
            std::memcpy(&a[i * 4], &v, 4);
          }
        }
        b = a;
        const simd::Ref dy = mode == 0 ? simd::Ref{} : simd::Ref{dyb.data(), true};
        // Odd bounds, so the one-lane tails are covered too.
        for (auto [b0, e0] : {std::pair<std::int64_t, std::int64_t>{0, 5}, {5, n - 3}, {n - 3, n}}) {
          k->gelu(simd::Act::kGeluErf, {xb.data(), true}, dy, {a.data(), out_bf}, b0, e0, mode == 2);
          k->gelu(simd::Act::kGeluErf, {xf.data(), false}, dy, {b.data(), out_bf}, b0, e0, mode == 2);
        }
        // A NaN's payload may differ (which NaN operand an instruction passes on depends on how
        // the compiler ordered it in each copy of the code): NaN for NaN, other bytes equal.
        std::int64_t bad = 0, first = -1;
        for (std::int64_t i = 0; i < n; ++i) {
          float va, vb;
          if (out_bf) {
            std::uint16_t ha, hb;
            std::memcpy(&ha, &a[i * 2], 2);
            std::memcpy(&hb, &b[i * 2], 2);
            va = bf16_to_float(ha), vb = bf16_to_float(hb);
          } else {
            std::memcpy(&va, &a[i * 4], 4);
            std::memcpy(&vb, &b[i * 4], 4);
          }
          const bool same = std::isnan(vb) ? std::isnan(va) : std::memcmp(&a[i * w], &b[i * w], w) == 0;
          if (!same && bad++ == 0) first = i;
        }
        EXPECT_EQ(bad, 0) << "first difference at bf16 input 0x" << std::hex << first;
      }
  }
}

}  // namespace
}  // namespace remat
