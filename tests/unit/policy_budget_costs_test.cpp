// PolicyRegistry::plan with given step costs (e.g. measured times) instead of FLOPs: the budget
// policy plans with them, and the registry refuses costs that do not fit the block table.
#include <gtest/gtest.h>

#include "core/schedule/validator.h"
#include "plugins/budget/budget_chain.h"
#include "plugins/budget/budget_dp.h"
#include "policy_test_util.h"

namespace remat {
namespace {

using namespace remat::budget;

// The option each block took, read back from the schedule's forward actions.
std::vector<int> choice_of(const Schedule& s) {
  std::vector<int> c(static_cast<std::size_t>(s.blocks), -1);
  for (const auto& a : s.actions) {
    if (a.kind != ActionKind::Forward) continue;
    c[static_cast<std::size_t>(a.block)] = a.keep.kind == KeepKind::All     ? Store
                                           : a.keep.kind == KeepKind::Named ? Selective
                                                                            : Checkpoint;
  }
  return c;
}

// The softmax (the heart of the selective option under naive attention) far dearer than its
// FLOPs say, everything else almost free: recomputing the selective set now costs about as much
// as recomputing the whole block, which frees far more memory.
std::vector<double> softmax_heavy(const BlockGraph& g) {
  std::vector<double> c;
  for (const auto& s : g.steps()) c.push_back(s.kind == StepKind::Softmax ? 1e9 : 1.0);
  return c;
}

TEST(PolicyBudgetCosts, GivenCostsChangeThePlanAndItStillFitsTheBudget) {
  const ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive, 4);
  BlockGraph g(m);
  const std::vector<std::string> sel = g.default_selective();
  const ChainSpec by_flops = chain_from_graph(g, test::forward_flops(g), m.layers, sel);
  const StepCosts heavy{softmax_heavy(g), "ns (test)"};
  const ChainSpec by_time = chain_from_graph(g, heavy.cost, m.layers, sel);
  const std::uint64_t lo = min_budget(by_flops.chain);
  const std::uint64_t hi = simulate(m, test::plan("none", m), nullptr).activation_peak_bytes;
  ASSERT_LT(lo, hi);

  // A budget where the FLOP-optimal choice is strictly worse under the given costs than their
  // optimum, so a planner that used the given costs must choose differently.
  std::optional<std::uint64_t> budget;
  for (int k = 0; k <= 64 && !budget; ++k) {
    const std::uint64_t b = lo + (hi - lo) * static_cast<std::uint64_t>(k) / 64;
    const Solution f = solve(by_flops.chain, b), t = solve(by_time.chain, b);
    ASSERT_TRUE(f.feasible && t.feasible);
    if (t.cost < chain_cost(by_time.chain, f.choice) * 0.5) budget = b;
  }
  ASSERT_TRUE(budget) << "no budget between " << lo << " and " << hi << " separates the costs";

  const PolicyChoice choice{"budget", {}};
  const Schedule flops_plan = test::plugins().plan(choice, m, budget);
  const Schedule time_plan = test::plugins().plan(choice, m, budget, &heavy);
  const std::vector<int> fc = choice_of(flops_plan), tc = choice_of(time_plan);
  EXPECT_NE(fc, tc);
  // Each plan is optimal for the costs it was given.
  EXPECT_DOUBLE_EQ(chain_cost(by_flops.chain, fc), solve(by_flops.chain, *budget).cost);
  EXPECT_DOUBLE_EQ(chain_cost(by_time.chain, tc), solve(by_time.chain, *budget).cost);
  EXPECT_LT(chain_cost(by_time.chain, tc), chain_cost(by_time.chain, fc));
  // And both fit the budget in the simulator.
  EXPECT_LE(simulate(m, time_plan, nullptr).activation_peak_bytes, *budget);
  EXPECT_LE(simulate(m, flops_plan, nullptr).activation_peak_bytes, *budget);
  EXPECT_NO_THROW(validate_schedule(time_plan, g));
}

TEST(PolicyBudgetCosts, FlopsAsGivenCostsPlanAsWithout) {
  const ModelConfig m = test::tiny(Family::Llama, AttentionImpl::Flash, 4);
  BlockGraph g(m);
  const StepCosts flops{test::forward_flops(g), "flops"};
  const std::uint64_t hi = simulate(m, test::plan("none", m), nullptr).activation_peak_bytes;
  const PolicyChoice choice{"budget", {}};
  for (std::uint64_t b : {hi * 6 / 10, hi * 8 / 10}) {
    EXPECT_EQ(choice_of(test::plugins().plan(choice, m, b, &flops)),
              choice_of(test::plugins().plan(choice, m, b)));
  }
}

TEST(PolicyBudgetCosts, CostsThatDoNotFitTheTableAreRefused) {
  const ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive, 2);
  BlockGraph g(m);
  const PolicyChoice choice{"none", {}};
  StepCosts c{std::vector<double>(g.steps().size() - 1, 1.0), "ns (test)"};
  EXPECT_THROW(test::plugins().plan(choice, m, std::nullopt, &c), Error);
  c.cost.assign(g.steps().size(), 1.0);
  EXPECT_NO_THROW(test::plugins().plan(choice, m, std::nullopt, &c));
  c.cost[2] = -1.0;
  try {
    test::plugins().plan(choice, m, std::nullopt, &c);
    ADD_FAILURE() << "a negative cost was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(g.steps()[2].name), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace remat
