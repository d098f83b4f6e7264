// Revolve reaches the proven optimum L + t(L, s) block forwards for every L <= 64 and
// s < L, s <= 12 (counted by the validator and by the simulator's walk), within s slots;
// executed on the smallest blocks, its gradients are those of `none` to the bit.
#include <gtest/gtest.h>

#include <map>

#include "core/schedule/validator.h"
#include "plugins/revolve/revolve.h"
#include "policy_test_util.h"

namespace remat {
namespace {

// t(l, s) = r·l − C(s + r, s + 1), r the smallest integer with C(s + r, s) >= l.
std::uint64_t closed_form(std::uint64_t l, std::uint64_t s) {
  auto C = [](std::uint64_t n, std::uint64_t k) {
    long double c = 1;
    for (std::uint64_t i = 1; i <= k; ++i) c = c * static_cast<long double>(n - k + i) / i;
    return static_cast<std::uint64_t>(c + 0.5L);
  };
  std::uint64_t r = 0;
  while (C(s + r, s) < l) ++r;
  return r * l - C(s + r, s + 1);
}

ModelConfig micro(int layers) {
  ModelConfig m;
  m.name = "micro";
  m.layers = layers;
  m.hidden = 8;
  m.heads = 2;
  m.kv_heads = 2;
  m.ffn = 32;
  m.seq = 4;
  m.positions = 4;
  m.batch = 1;
  m.vocab = 16;
  m.dropout = 0.1;
  return m;
}

TEST(PolicyRevolve, ClosedFormEqualsTheRecursionsOptimum) {
  // By dynamic programming over every split: T(l, s) = min_m m + T(l - m, s - 1) + T(m, s).
  const int N = 200, S = 12;
  const std::uint64_t inf = ~std::uint64_t{0} / 4;
  std::vector<std::vector<std::uint64_t>> T(N + 1, std::vector<std::uint64_t>(S + 1, inf));
  for (int s = 0; s <= S; ++s) T[1][s] = 0;
  for (int l = 2; l <= N; ++l)
    for (int s = 1; s <= S; ++s)
      for (int m = 1; m < l; ++m)
        T[l][s] = std::min(T[l][s], m + T[l - m][s - 1] + T[m][s]);
  for (int l = 1; l <= N; ++l)
    for (int s = 1; s <= S; ++s) {
      ASSERT_EQ(revolve::min_advances(l, s), T[l][s]) << "l=" << l << " s=" << s;
      ASSERT_EQ(closed_form(l, s), T[l][s]) << "l=" << l << " s=" << s;
      if (l >= 2) {
        std::uint64_t m = revolve::split(l, s);
        ASSERT_GE(m, 1u);
        ASSERT_LT(m, static_cast<std::uint64_t>(l));
        EXPECT_EQ(m + T[l - m][s - 1] + T[m][s], T[l][s]) << "split of l=" << l << " s=" << s;
      }
    }
}

TEST(PolicyRevolve, ReachesTheOptimumForEveryLengthAndSlotCount) {
  for (int L = 2; L <= 64; ++L) {
    ModelConfig m = micro(L);
    BlockGraph g(m);
    for (int s = 1; s < L && s <= 12; ++s) {
      // Planned in this process: ~700 plans, each through a child process, were most of the
      // test's time under the sanitizers (ExecutedGradientsEqualNone plans through the registry).
      Schedule sch = test::plan_here("revolve:snapshots=" + std::to_string(s), m);
      EXPECT_EQ(sch.checkpoint_slots, s);
      ScheduleStats st = validate_schedule(sch, g);
      const std::uint64_t want = static_cast<std::uint64_t>(L) + closed_form(L, s);
      ASSERT_EQ(st.block_forwards, want) << "L=" << L << " s=" << s;
      ASSERT_LE(st.max_checkpoints, s) << "L=" << L << " s=" << s;
      // The simulator walks the executor over the same schedule and counts what ran.
      {
        Prediction p = simulate(m, sch, nullptr);
        ASSERT_EQ(p.block_forwards, want) << "L=" << L << " s=" << s;
      }
    }
  }
}

TEST(PolicyRevolve, ExecutedGradientsEqualNone) {
  struct Case {
    int L, s;
  };
  // Every (L, s) up to 16 blocks, then a spread up to 64 (all of them take ~30 s).
  std::vector<Case> cases;
  for (int L = 2; L <= 16; ++L)
    for (int s = 1; s < L; ++s) cases.push_back({L, s});
  for (Case c : {Case{12, 4}, Case{16, 3}, Case{21, 5}, Case{30, 12}, Case{40, 2}, Case{64, 6},
                 Case{64, 12}})
    cases.push_back(c);
  // `none` depends on L alone: one run per length serves each of its slot counts.
  std::map<int, Trace> none_of;
  for (Case c : cases) {
    SCOPED_TRACE("L=" + std::to_string(c.L) + " s=" + std::to_string(c.s));
    ModelConfig m = micro(c.L);
    auto it = none_of.find(c.L);
    if (it == none_of.end()) it = none_of.emplace(c.L, test::run(m, test::plan("none", m), 1, 0)).first;
    const Trace& base = it->second;
    Trace t = test::run(m, test::plan("revolve:snapshots=" + std::to_string(c.s), m), 1, 0);
    EXPECT_EQ(t.losses(), base.losses());
    EXPECT_EQ(t.grad_checksum, base.grad_checksum);
    EXPECT_EQ(test::counted_block_forwards(t),
              static_cast<std::uint64_t>(c.L) + closed_form(c.L, c.s));
    EXPECT_EQ(test::counted_recompute_flops(t), t.plan.flops_recompute);
    EXPECT_EQ(t.peak_bytes, t.predicted_peak_bytes);
  }
}

TEST(PolicyRevolve, MoreSlotsThanBlocksIsPerBlockCheckpointing) {
  ModelConfig m = micro(6);
  Schedule s = test::plan("revolve:snapshots=20", m);
  EXPECT_EQ(validate_schedule(s, BlockGraph(m)).block_forwards, 6u + 5u);
}

TEST(PolicyRevolve, PlansAHundredThousandBlocksAtTheOptimum) {
  Schedule s;
  s.blocks = 100000;
  revolve::plan(100000, 20, s);
  std::uint64_t forwards = 0;
  for (const auto& a : s.actions)
    forwards += a.kind == ActionKind::Forward || a.kind == ActionKind::Recompute;
  EXPECT_EQ(forwards, 100000u + closed_form(100000, 20));
  // Its planning time is a benchmark figure (bench/policy_planning_bench.cpp), not a test.
}

}  // namespace
}  // namespace remat
