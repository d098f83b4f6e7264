// The row arithmetic of the CUDA cross-entropy kernel (kernels/detail/xent_row.h), run on the
// host: which elements each thread owns, and the (max, sum) pairs the threads merge.
#include "kernels/detail/xent_row.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace remat::kernels::detail {
namespace {

std::vector<float> random_row(int V, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  std::vector<float> x(static_cast<std::size_t>(V));
  for (float& v : x) v = nd(rng);
  return x;
}

// Every thread's part, merged over the threads in a butterfly like the block reduction.
template <int VEC, int U>
MaxSum block_pair(const std::vector<float>& x, int nt) {
  const int V = static_cast<int>(x.size());
  std::vector<MaxSum> p(static_cast<std::size_t>(nt));
  for (int t = 0; t < nt; ++t)
    p[t] = row_maxsum_partial<VEC, U>(V, t, nt, [&](int j, auto& f) {
      constexpr int n = sizeof(f) / sizeof(float);
      for (int k = 0; k < n; ++k) f[k] = x[static_cast<std::size_t>(j + k)];
    });
  for (int o = 1; o < nt; o <<= 1)
    for (int t = 0; t + o < nt; t += 2 * o) p[t] = maxsum_merge(p[t], p[t + o]);
  return p[0];
}

void expect_pair(const std::vector<float>& x, MaxSum got) {
  double m = -INFINITY;
  for (float v : x) m = std::fmax(m, v);
  double s = 0.0;
  for (float v : x) s += std::exp(static_cast<double>(v) - m);
  EXPECT_EQ(got.m, static_cast<float>(m));
  EXPECT_NEAR(got.s, s, 2e-6 * s);
}

TEST(XentRow, EveryElementBelongsToExactlyOneThread) {
  for (int V : {1, 3, 4, 5, 31, 512, 2047, 2048, 2051, 50304, 50257}) {
    for (int nt : {32, 512}) {
      std::vector<int> seen_vec4(static_cast<std::size_t>(V), 0), seen_vec1 = seen_vec4;
      auto visit = [&](std::vector<int>& seen, int t) {
        return [&seen, t, V](int j, auto& f) {
          constexpr int n = sizeof(f) / sizeof(float);
          for (int k = 0; k < n; ++k) {
            ASSERT_LT(j + k, V);
            ++seen[static_cast<std::size_t>(j + k)];
            f[k] = static_cast<float>(t);
          }
        };
      };
      for (int t = 0; t < nt; ++t) {
        // emit sees exactly what load gave it, at the same index.
        auto check = [t](int, auto& f) {
          for (float v : f) ASSERT_EQ(v, static_cast<float>(t));
        };
        row_stride<4, 4>(V, t, nt, visit(seen_vec4, t), check);
        row_stride<1, 4>(V, t, nt, visit(seen_vec1, t), check);
      }
      for (int j = 0; j < V; ++j) {
        ASSERT_EQ(seen_vec4[static_cast<std::size_t>(j)], 1) << "VEC 4, V " << V << ", j " << j;
        ASSERT_EQ(seen_vec1[static_cast<std::size_t>(j)], 1) << "VEC 1, V " << V << ", j " << j;
      }
    }
  }
}

TEST(XentRow, MergedPairIsTheRowsMaxAndSumOfExponentials) {
  for (int V : {1, 7, 64, 1001, 50304, 50257}) {
    const std::vector<float> x = random_row(V, static_cast<unsigned>(V));
    expect_pair(x, block_pair<4, 4>(x, 512));
    expect_pair(x, block_pair<1, 4>(x, 512));
    expect_pair(x, block_pair<4, 1>(x, 32));
  }
}

TEST(XentRow, InfinitiesAndEmptyParts) {
  // Fewer elements than threads: most parts are empty and must merge as nothing.
  std::vector<float> x = {-INFINITY, 2.0f, -INFINITY, -1.0f, -INFINITY};
  expect_pair(x, block_pair<1, 4>(x, 512));
  // A row of -inf only: max -inf, sum 0 (the loss then becomes NaN or inf, never garbage).
  std::vector<float> none(9, -INFINITY);
  const MaxSum p = block_pair<4, 4>(none, 32);
  EXPECT_EQ(p.m, -INFINITY);
  EXPECT_EQ(p.s, 0.0f);
  // A rising row forces a rescale in every round.
  std::vector<float> up(3000);
  for (std::size_t i = 0; i < up.size(); ++i) up[i] = 0.01f * static_cast<float>(i);
  expect_pair(up, block_pair<4, 4>(up, 64));
}

TEST(XentRow, MergeIsSymmetricBitForBit) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-30.0f, 30.0f), su(0.0f, 100.0f);
  for (int i = 0; i < 1000; ++i) {
    const MaxSum a{u(rng), su(rng)}, b{u(rng), su(rng)};
    const MaxSum ab = maxsum_merge(a, b), ba = maxsum_merge(b, a);
    EXPECT_EQ(std::memcmp(&ab, &ba, sizeof ab), 0);
  }
}

}  // namespace
}  // namespace remat::kernels::detail
