// The initial weights' AVX-512 lanes (core/engine/weight_init_simd.h) against glibc's logf,
// sinf and cosf on every input the initialization can give them, and the values they make
// against the scalar loop's. Where the CPU has no AVX-512F the lanes never run and the tests
// say so.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/engine/weight_init.h"
#include "core/engine/weight_init_simd.h"

namespace remat {
namespace {

namespace ws = weight_simd;

// Every float u in [2^-32, 1] (a superset of (float(a) + 1) / 2^32 for 32-bit a, the log's
// input): the lanes' logf bits are glibc's. Then th = 6.2831853 u for u = 0 and every such u (a
// superset of the angles, float(b) / 2^32 scaled): their sinf and cosf bits are glibc's.
TEST(WeightInitSimd, LogSinCosGiveLibmsBitsOnEveryInputOfTheInit) {
  if (!ws::cpu_has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512F: the lanes never run";
  const std::uint32_t first = std::bit_cast<std::uint32_t>(0x1p-32f), last = std::bit_cast<std::uint32_t>(1.0f);
  alignas(64) float u[16], th[16], lg[16], s[16], c[16];
  std::uint64_t inputs = 0, bad_log = 0, bad_sin = 0, bad_cos = 0;
  std::uint32_t first_bad = 0;
  for (std::uint32_t b = first - 1; b <= last; b += 16) {  // b = first - 1 stands for u = 0
    for (int j = 0; j < 16; ++j) {
      const std::uint32_t bits = std::min(last, b + static_cast<std::uint32_t>(j));
      u[j] = bits < first ? 0.0f : std::bit_cast<float>(bits);
      th[j] = 6.2831853f * u[j];
    }
    ws::sincos16(th, s, c);
    ws::log16(u, lg);
    for (int j = 0; j < 16; ++j) {
      if (u[j] != 0.0f && std::bit_cast<std::uint32_t>(lg[j]) != std::bit_cast<std::uint32_t>(std::log(u[j]))) {
        if (!bad_log++) first_bad = std::bit_cast<std::uint32_t>(u[j]);
      }
      bad_sin += std::bit_cast<std::uint32_t>(s[j]) != std::bit_cast<std::uint32_t>(std::sin(th[j]));
      bad_cos += std::bit_cast<std::uint32_t>(c[j]) != std::bit_cast<std::uint32_t>(std::cos(th[j]));
    }
    inputs += 16;
  }
  EXPECT_GT(inputs, std::uint64_t{1} << 28);
  EXPECT_EQ(bad_log, 0u) << "first at u = " << std::bit_cast<float>(first_bad);
  EXPECT_EQ(bad_sin, 0u);
  EXPECT_EQ(bad_cos, 0u);
  EXPECT_TRUE(ws::active()) << "the lanes agree with libm, so normal_values takes them";
}

// The values: the lanes and the scalar loop over whole parameters with heads and tails off the
// 64-value groups, with keys whose counters cross 2^32 blocks.
TEST(WeightInitSimd, ValuesEqualTheScalarLoops) {
  if (!ws::active()) GTEST_SKIP() << "the AVX-512 lanes are not used on this CPU";
  struct Case {
    DropoutKey key;
    std::int64_t numel, begin, end;
  };
  const std::int64_t wrap = (std::int64_t{1} << 34) - 4 * 40;  // block 2^32 - 40
  const Case cases[] = {{weight_init_key(1, 0), 50257 * 16 + 3, 0, 50257 * 16 + 3},
                        {weight_init_key(0xFFFFFFFF12345678ull, 7), 100003, 4, 99996},
                        {weight_init_key(9, 2), wrap + 1000, wrap, wrap + 1000},
                        {weight_init_key(3, 1), 63, 0, 63}};
  for (const Case& k : cases) {
    std::vector<float> lanes(static_cast<std::size_t>(k.end - k.begin)), scalar(lanes.size());
    normal_values(k.key, 0.02f, k.numel, k.begin, k.end, lanes.data());
    ws::set_enabled(false);
    normal_values(k.key, 0.02f, k.numel, k.begin, k.end, scalar.data());
    ws::set_enabled(true);
    EXPECT_EQ(std::memcmp(lanes.data(), scalar.data(), lanes.size() * sizeof(float)), 0)
        << "numel " << k.numel << " [" << k.begin << ", " << k.end << ")";
  }
}

}  // namespace
}  // namespace remat
