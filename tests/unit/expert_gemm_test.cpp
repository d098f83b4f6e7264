// The experts' projections on the CPU grouped over the lanes (cpu_expert_gemm.cpp): an expert
// with less than 1/lanes of the rows runs whole on one lane (each GEMM above what a lone GEMM is
// split over lanes for), so its rows, weights' gradient and biases' gradient have the bits of the
// one-lane backend, in fp32 and bf16, forward and backward; a larger expert splits over the lanes
// and stays within rounding of them; where the lanes' workspace parts do not fit, every expert
// runs in turn; runs repeat bitwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/backend/moe_rows.h"
#include "cpu_test_util.h"

namespace remat {
namespace {

constexpr std::int64_t T = 64;
constexpr int E = 8, k = 2, H = 256, N = 512;  // about 16 rows an expert: 2·16·256·512 FLOPs, above 4e6

struct Result {
  std::vector<float> y, dx, dw, db;
  std::vector<std::int32_t> table;
  int one_lane = 0;  // experts the backward ran whole on one lane
};

// Routes T tokens (expert 0 preferred by `skew` on its logit), then runs ExpertLinear forward and
// backward (with biases) on a backend of `threads` lanes.
Result run(int threads, DType dt, float skew, std::uint64_t ws = 32u << 20) {
  cputest::Env env(threads, ws);
  MoeDims d;
  d.experts = E, d.top_k = k, d.tokens = T, d.norm_topk = true;
  auto logits = cputest::randv(T * E, 21, -1.0f, 1.0f);
  for (std::int64_t t = 0; t < T; ++t) logits[t * E] += skew;
  const std::int64_t R = d.rows();
  Tensor tl = env.from(logits), tw = env.make(DType::F32, T * k), tr = env.make(DType::I32, MoeTable(d).entries);
  OpArgs a;
  a.moe = d;
  a.in[0] = &tl, a.out[0] = &tw, a.out[1] = &tr, a.M = T, a.K = k, a.N = E;
  env.be.run(OpKind::MoeRoute, Pass::Forward, a);
  Tensor x = env.from(cputest::randv(R * H, 22), dt), W = env.from(cputest::randv(E * N * H, 23), dt),
         b = env.from(cputest::randv(E * N, 24), dt), y = env.make(dt, R * N), dy = env.from(cputest::randv(R * N, 25), dt),
         dx = env.make(dt, R * H), dW = env.make(dt, E * N * H), db = env.make(dt, E * N);
  a = OpArgs{};
  a.moe = d;
  a.in[0] = &x, a.in[1] = &tr, a.out[0] = &y, a.w = &W, a.b = &b, a.M = R, a.K = H, a.N = N;
  env.be.run(OpKind::ExpertLinear, Pass::Forward, a);
  a.dout[0] = &dy, a.din[0] = &dx, a.dw = &dW, a.db = &db;
  env.be.run(OpKind::ExpertLinear, Pass::Backward, a);
  Result r{env.get(y), env.get(dx), env.get(dW), env.get(db), std::vector<std::int32_t>(MoeTable(d).entries),
           env.be.experts_on_one_lane()};
  std::memcpy(r.table.data(), tr.data, r.table.size() * 4);
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b, std::int64_t from, std::int64_t n) {
  return std::memcmp(a.data() + from, b.data() + from, static_cast<std::size_t>(n) * sizeof(float)) == 0;
}

TEST(ExpertGemmGroups, SmallExpertsHaveTheBitsOfOneLaneLargeOnesTheirRounding) {
  for (DType dt : {DType::F32, DType::BF16})
    for (float skew : {0.0f, 4.0f}) {  // even routing: every expert small; skewed: expert 0 has every token
      SCOPED_TRACE(::testing::Message() << (dt == DType::BF16 ? "bf16" : "fp32") << " skew " << skew);
      const Result one = run(1, dt, skew), two = run(2, dt, skew), again = run(2, dt, skew);
      ASSERT_EQ(one.table, two.table);
      const std::int32_t* start = two.table.data() + 2 * T * k;
      const std::int32_t* count = start + E;
      int small = 0, large = 0;
      for (int e = 0; e < E; ++e) {
        SCOPED_TRACE(e);
        const std::int64_t s = start[e], n = count[e];
        const bool whole = n * 2 < T * k;  // less than half of the rows: one lane
        (whole ? small : large) += n > 0;
        if (whole) {
          EXPECT_TRUE(same_bits(one.y, two.y, s * N, n * N));
          EXPECT_TRUE(same_bits(one.dx, two.dx, s * H, n * H));
          EXPECT_TRUE(same_bits(one.dw, two.dw, e * N * H, n > 0 ? N * H : 0));
          EXPECT_TRUE(same_bits(one.db, two.db, e * N, n > 0 ? N : 0));
        } else {
          const double tol = dt == DType::BF16 ? 2e-2 : 1e-5;
          for (std::int64_t i = s * N; i < (s + n) * N; ++i) EXPECT_NEAR(one.y[i], two.y[i], tol * (1 + std::abs(one.y[i])));
          for (std::int64_t i = e * N * H; i < (e + 1) * N * H; ++i)
            EXPECT_NEAR(one.dw[i], two.dw[i], tol * (1 + std::abs(one.dw[i])));
        }
      }
      EXPECT_EQ(small, skew == 0.0f ? E : E - 1);
      EXPECT_EQ(large, skew == 0.0f ? 0 : 1);
      EXPECT_EQ(two.one_lane, small);
      EXPECT_EQ(one.one_lane, 0);
      EXPECT_EQ(two.y, again.y);
      EXPECT_EQ(two.dx, again.dx);
      EXPECT_EQ(two.dw, again.dw);
      EXPECT_EQ(two.db, again.db);
    }
}

// A workspace that holds one expert's GEMM but not one for each lane: every expert in turn, split
// over the lanes, within rounding of one lane.
TEST(ExpertGemmGroups, AWorkspaceTooSmallForTheLanesRunsTheExpertsInTurn) {
  const std::uint64_t ws = 768u << 10;  // one bf16 expert of 16-odd rows needs about 0.6 MB
  const Result one = run(1, DType::BF16, 0.0f), two = run(2, DType::BF16, 0.0f, ws);
  EXPECT_EQ(two.one_lane, 0);
  ASSERT_EQ(one.y.size(), two.y.size());
  for (std::size_t i = 0; i < one.y.size(); ++i) ASSERT_NEAR(one.y[i], two.y[i], 2e-2 * (1 + std::abs(one.y[i])));
  for (std::size_t i = 0; i < one.dw.size(); ++i) ASSERT_NEAR(one.dw[i], two.dw[i], 2e-2 * (1 + std::abs(one.dw[i])));
}

}  // namespace
}  // namespace remat
