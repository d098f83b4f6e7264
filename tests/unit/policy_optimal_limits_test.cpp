// The optimal policy's limits: time_limit stops the exact program naming the block it was at,
// and fallback=budget then plans the step with the budget policy's block-level program (only
// when asked); several budgets planned in one go fall back budget by budget alike.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/schedule/schedule.h"
#include "policy_test_util.h"

namespace remat {
namespace {

bool has(const std::string& s, const std::string& w) { return s.find(w) != std::string::npos; }

// A budget a third of the way from the budget policy's smallest one to none's peak.
std::uint64_t mid_budget(const ModelConfig& m) {
  const std::uint64_t all = simulate(m, test::plan("none", m), nullptr).activation_peak_bytes;
  std::uint64_t least = 0;
  try {
    test::plan("budget", m, 1);
  } catch (const Error& e) {
    const std::string what = e.what(), key = "smallest feasible budget is ";
    least = std::stoull(what.substr(what.find(key) + key.size()));
  }
  return least + (all - least) / 3;
}

TEST(PolicyOptimalLimits, PastItsTimeLimitItNamesTheBlockAndFallsBackOnlyWhenAsked) {
  const ModelConfig m = test::tiny(Family::Qwen3Moe, AttentionImpl::Flash, 0.1, 3);
  const std::uint64_t at = mid_budget(m);
  try {
    test::plan("optimal:time_limit=0", m, at);
    FAIL() << "planned past a time limit of 0 s";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "stopped at block 0")) << e.what();
    EXPECT_TRUE(has(e.what(), "time_limit of 0 s")) << e.what();
    EXPECT_TRUE(has(e.what(), "fallback=budget")) << e.what();
  }
  const Schedule fell = test::plan("optimal:time_limit=0,fallback=budget", m, at);
  EXPECT_EQ(fell.params, "budget=" + std::to_string(at) + ",fallback=budget");
  const Schedule block_level = test::plan("budget", m, at);
  EXPECT_EQ(fell.actions.size(), block_level.actions.size());
  const Prediction pf = simulate(m, fell, nullptr), pb = simulate(m, block_level, nullptr);
  EXPECT_EQ(pf.flops.recompute, pb.flops.recompute);
  EXPECT_EQ(pf.activation_peak_bytes, pb.activation_peak_bytes);
  EXPECT_LE(pf.activation_peak_bytes, at);
  // Within its time the exact program plans, whatever fallback says.
  const Schedule exact = test::plan("optimal:time_limit=600,fallback=budget", m, at);
  EXPECT_EQ(schedule_to_json(exact), schedule_to_json(test::plan("optimal", m, at)));
  EXPECT_LE(simulate(m, exact, nullptr).flops.recompute, pb.flops.recompute);
}

TEST(PolicyOptimalLimits, SeveralBudgetsFallBackEachAsAlone) {
  const ModelConfig m = test::tiny(Family::Llama, AttentionImpl::Naive, 0.1, 3);
  const BlockGraph g(m);
  const std::uint64_t at = mid_budget(m);
  const std::vector<std::uint64_t> budgets = {at, 1, at + 4096};
  const PolicyChoice choice = parse_policy_choice("optimal:time_limit=0,fallback=budget");
  const std::vector<BudgetedPlan> got = test::plugins().plan_budgets(choice, g, budgets);
  ASSERT_EQ(got.size(), budgets.size());
  for (std::size_t i = 0; i < budgets.size(); ++i) {
    if (budgets[i] == 1) {
      EXPECT_FALSE(got[i].schedule);
      EXPECT_TRUE(has(got[i].error, "fallback=budget")) << got[i].error;
      EXPECT_TRUE(has(got[i].error, "it needs at least")) << got[i].error;
      continue;
    }
    ASSERT_TRUE(got[i].schedule) << got[i].error;
    EXPECT_EQ(schedule_to_json(*got[i].schedule),
              schedule_to_json(test::plan("optimal:time_limit=0,fallback=budget", m, budgets[i])));
  }
}

}  // namespace
}  // namespace remat
