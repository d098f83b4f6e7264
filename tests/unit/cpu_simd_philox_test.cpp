// The dropout mask's SIMD Philox kernel: every kernel set writes the reference's bytes (and the
// reference's bytes are Philox's bits against the threshold), for masks of every length around
// a vector's width, offsets that start inside a group of four and past 2^34 (the counter's high
// word), tensor-parallel runs, and several thread counts.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/util/philox.h"
#include "tests/unit/cpu_simd_test_util.h"
#include "tests/unit/cpu_test_util.h"

namespace remat {
namespace {

using cputest::Env;

std::vector<std::uint8_t> mask_bytes(const DropoutKey& key, float p, std::int64_t n, int threads) {
  Env e(threads, 0);  // no workspace: the mask needs none
  Tensor m = e.make(DType::U8, n);
  e.be.dropout_mask(m, key, p, n);
  return e.bytes(m);
}

std::vector<DropoutKey> keys() {
  std::vector<DropoutKey> v;
  for (std::uint64_t off : {0ull, 1ull, 3ull, (1ull << 34) - 6, (1ull << 34) + 5}) {
    DropoutKey k{0x1234567890abcdefull, 9, 2, kSiteAttentionProbs};
    k.offset = off;
    v.push_back(k);
    k.run = 37, k.stride = 100;  // runs of 37 elements, 100 apart
    v.push_back(k);
  }
  return v;
}

TEST(CpuSimdPhilox, EveryKernelSetWritesTheReferenceMask) {
  for (const DropoutKey& key : keys())
    for (std::int64_t n : {1, 3, 4, 5, 15, 17, 63, 64, 65, 1000, 70001})
      for (float p : {0.1f, 0.5f}) {
        SCOPED_TRACE("offset " + std::to_string(key.offset) + " run " + std::to_string(key.run) +
                     " n " + std::to_string(n) + " p " + std::to_string(p));
        auto r = simdtest::per_set([&] {
          simdtest::Outputs o;
          for (int threads : {1, 2, 3}) o.push_back(mask_bytes(key, p, n, threads));
          return o;
        });
        simdtest::expect_same_bytes(r, "dropout mask");
        // The reference itself: bits >= threshold of each element's place in the global mask.
        const std::vector<std::uint8_t>& ref = r[0].second[0];
        const std::uint32_t thr = dropout_threshold(p);
        std::int64_t kept = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(ref[i], philox_bits(key, static_cast<std::uint64_t>(i)) >= thr ? 1 : 0) << i;
          kept += ref[i];
        }
        if (n >= 1000) EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - p, 0.05);
      }
}

}  // namespace
}  // namespace remat
