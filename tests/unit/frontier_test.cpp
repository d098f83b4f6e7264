// The frontier of a policy that plans to a memory budget (core/analysis/frontier.h): whatever the
// policy plans (here one that fails, overshoots and wobbles on purpose, tests/plugins/
// budget_wobbly.cpp), the line starts at the smallest budget the policy names, ends at none's
// activation peak, never rises and keeps every point within its budget; bad requests are refused.
#include <gtest/gtest.h>

#include "core/analysis/frontier.h"
#include "core/engine/simulator.h"
#include "plugin_test_util.h"
#include "policy_test_util.h"

namespace remat {
namespace {

TEST(Frontier, NeverRisesAndStaysWithinEachBudgetWhateverThePolicyPlans) {
  PolicyRegistry r;
  r.load_dirs({test::kPlugins});
  r.load_file(test::kBroken + "/budget_wobbly.so");
  ASSERT_NE(r.find("budget_wobbly"), nullptr);
  // A plan of this tiny model takes well under a second, also under the sanitizers; a child that
  // does not answer (once, under the sanitizers and a loaded machine, a batch's child never did
  // within ctest's 900 s: the batch's limit is 60 s times its budgets) is stopped after 10 s a
  // budget and its budgets planned again one by one, as a crashed batch's are.
  r.set_plan_timeout(10);
  const ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive);
  const Frontier f = compute_frontier(r, m, "budget_wobbly", 48, false);
  ASSERT_EQ(f.line.size(), 48u);
  EXPECT_TRUE(f.others.empty());
  EXPECT_EQ(f.store_all_budget, simulate(m, test::plan("none", m), nullptr).activation_peak_bytes);
  EXPECT_EQ(f.line.front().budget, f.smallest_budget);
  EXPECT_EQ(f.line.back().budget, f.store_all_budget);
  int borrowed = 0;
  for (std::size_t i = 0; i < f.line.size(); ++i) {
    const FrontierPoint& p = f.line[i];
    EXPECT_LE(p.activation_peak, p.budget) << i;
    if (i > 0) {
      EXPECT_GT(p.budget, f.line[i - 1].budget) << i;
      EXPECT_LE(p.recompute_flops, f.line[i - 1].recompute_flops) << i;
    }
    borrowed += p.from_smaller_budget ? 1 : 0;
  }
  EXPECT_GT(borrowed, 0);  // the policy failed, overshot or cost more at some budgets
  EXPECT_LT(borrowed, 47);
  // A crash (from the fifth 4 KiB band on) takes down its batch, not the other budgets in it:
  // past the crashing bands the policy's own plans still make points.
  int own_after_crashes = 0;
  for (const FrontierPoint& p : f.line)
    own_after_crashes += p.budget >= f.smallest_budget + 9 * 4096 && !p.from_smaller_budget ? 1 : 0;
  EXPECT_GT(own_after_crashes, 0);
  // Each point of its own is the plan made at its budget alone (every third, to stay quick).
  for (std::size_t i = 0; i < f.line.size(); i += 3) {
    const FrontierPoint& p = f.line[i];
    if (p.from_smaller_budget) continue;
    const Prediction alone = simulate(m, r.plan({"budget_wobbly", {}}, m, p.budget), nullptr);
    EXPECT_EQ(p.activation_peak, alone.activation_peak_bytes) << i;
    EXPECT_EQ(p.recompute_flops, alone.flops.recompute) << i;
  }
}

// With offloads the policy weighs bytes moved against recomputation: no point is beaten by the
// one below it in both, and the policy's own cost (recompute FLOPs + 2 per byte offloaded) never
// rises; the offloaded bytes are the plan's host peak.
TEST(Frontier, WithOffloadsNoPointIsBeatenByTheOneBelowIt) {
  const ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive);
  const Frontier f = compute_frontier(test::plugins(), m, "optimal:offload_cost=2", 10, false);
  ASSERT_EQ(f.line.size(), 10u);
  int offloading = 0;  // points of the policy's own plans that offload
  for (std::size_t i = 0; i < f.line.size(); ++i) {
    const FrontierPoint& p = f.line[i];
    EXPECT_LE(p.activation_peak, p.budget) << i;
    if (p.from_smaller_budget) continue;
    offloading += p.offloaded > 0;
    EXPECT_EQ(p.offloaded, simulate(m, test::plan("optimal:offload_cost=2", m, p.budget), nullptr).host_peak_bytes) << i;
    if (i == 0) continue;
    const FrontierPoint& q = f.line[i - 1];
    EXPECT_FALSE(q.recompute_flops <= p.recompute_flops && q.offloaded <= p.offloaded &&
                 (q.recompute_flops < p.recompute_flops || q.offloaded < p.offloaded))
        << i;
    EXPECT_LE(static_cast<double>(p.recompute_flops) + 2.0 * static_cast<double>(p.offloaded),
              static_cast<double>(q.recompute_flops) + 2.0 * static_cast<double>(q.offloaded))
        << i;
  }
  EXPECT_GT(offloading, 1);
  EXPECT_EQ(f.line.back().offloaded, 0u);  // none's peak: nothing to offload or recompute
}

TEST(Frontier, RefusesWhatCannotHaveOne) {
  PolicyRegistry r;
  r.load_dirs({test::kPlugins});
  const ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive);
  EXPECT_NE(test::error_of([&] { compute_frontier(r, m, "selective", 8); }).find("does not plan to a memory budget (those that do: budget, optimal)"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { compute_frontier(r, m, "nosuch", 8); }).find("no policy 'nosuch'"), std::string::npos);
  EXPECT_NE(test::error_of([&] { compute_frontier(r, m, "budget", 1); }).find("at least 2 points"), std::string::npos);
}

}  // namespace
}  // namespace remat
