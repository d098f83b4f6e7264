// The budget policy's dynamic program against brute force on random heterogeneous chains, its
// chain model against the simulator, its refusals, and its plans against the fixed policies.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/schedule/validator.h"
#include "plugins/budget/budget_chain.h"
#include "plugins/budget/budget_dp.h"
#include "policy_test_util.h"

namespace remat {
namespace {

using namespace remat::budget;

// Every choice, cheapest first among those within the budget (ties: lower peak).
Solution brute_force(const Chain& c, std::uint64_t budget) {
  const std::size_t L = c.blocks.size();
  std::vector<int> choice(L, 0);
  Solution best;
  std::uint64_t combos = 1;
  for (std::size_t i = 0; i < L; ++i) combos *= kOptions;
  for (std::uint64_t k = 0; k < combos; ++k) {
    std::uint64_t x = k;
    bool ok = true;
    for (std::size_t i = 0; i < L; ++i) {
      choice[i] = static_cast<int>(x % kOptions);
      x /= kOptions;
      ok = ok && c.blocks[i].opt[static_cast<std::size_t>(choice[i])].allowed;
    }
    if (!ok) continue;
    std::uint64_t peak = chain_peak(c, choice);
    if (peak > budget) continue;
    double cost = chain_cost(c, choice);
    if (!best.feasible || cost < best.cost || (cost == best.cost && peak < best.peak)) {
      best = {true, choice, cost, peak};
    }
  }
  return best;
}

std::uint64_t brute_min_budget(const Chain& c) {
  return brute_force(c, ~std::uint64_t{0}).feasible ? [&] {
    std::uint64_t lo = ~std::uint64_t{0};
    const std::size_t L = c.blocks.size();
    std::vector<int> choice(L, 0);
    std::uint64_t combos = 1;
    for (std::size_t i = 0; i < L; ++i) combos *= kOptions;
    for (std::uint64_t k = 0; k < combos; ++k) {
      std::uint64_t x = k;
      bool ok = true;
      for (std::size_t i = 0; i < L; ++i) {
        choice[i] = static_cast<int>(x % kOptions);
        x /= kOptions;
        ok = ok && c.blocks[i].opt[static_cast<std::size_t>(choice[i])].allowed;
      }
      if (ok) lo = std::min(lo, chain_peak(c, choice));
    }
    return lo;
  }() : ~std::uint64_t{0};
}

Chain random_chain(std::mt19937_64& rng, int L) {
  std::uniform_int_distribution<int> small(1, 40), cost(0, 50), coin(0, 5);
  Chain c;
  c.base = static_cast<std::uint64_t>(small(rng) % 5);
  c.floor = static_cast<std::uint64_t>(small(rng));
  for (int b = 0; b < L; ++b) {
    ChainBlock blk;
    for (int o = 0; o < kOptions; ++o) {
      OptionCost& x = blk.opt[static_cast<std::size_t>(o)];
      x.kept = static_cast<std::uint64_t>(small(rng));
      x.fwd_peak = x.kept + static_cast<std::uint64_t>(small(rng));
      x.bwd_peak = static_cast<std::uint64_t>(small(rng)) + (o == Store ? 0 : x.kept);
      x.cost = o == Store ? 0.0 : static_cast<double>(cost(rng));
      x.allowed = o == Store || coin(rng) != 0;
    }
    c.blocks.push_back(blk);
  }
  return c;
}

TEST(PolicyBudget, DynamicProgramMatchesBruteForceOnRandomChains) {
  std::mt19937_64 rng(2024);
  int checked = 0, infeasible = 0;
  for (int L = 1; L <= 10; ++L) {
    for (int rep = 0; rep < (L <= 7 ? 40 : 8); ++rep) {
      Chain c = random_chain(rng, L);
      const std::uint64_t least = brute_min_budget(c);
      ASSERT_EQ(min_budget(c), least) << "L=" << L << " rep=" << rep;
      std::vector<int> at_least;
      min_budget(c, &at_least);
      EXPECT_EQ(chain_peak(c, at_least), least);
      std::uniform_int_distribution<std::uint64_t> pick(least > 10 ? least - 10 : 0, least + 200);
      for (int k = 0; k < 6; ++k) {
        const std::uint64_t budget = k == 0 ? least : pick(rng);
        Solution dp = solve(c, budget), bf = brute_force(c, budget);
        ASSERT_EQ(dp.feasible, bf.feasible) << "L=" << L << " budget=" << budget;
        ++checked;
        if (!dp.feasible) {
          ++infeasible;
          EXPECT_LT(budget, least);
          continue;
        }
        ASSERT_EQ(dp.cost, bf.cost) << "L=" << L << " budget=" << budget;
        EXPECT_EQ(chain_cost(c, dp.choice), dp.cost);
        EXPECT_LE(chain_peak(c, dp.choice), budget);
        EXPECT_EQ(dp.peak, chain_peak(c, dp.choice));
      }
    }
  }
  EXPECT_GT(checked, 1000);
  EXPECT_GT(infeasible, 0);
}

struct Config {
  Family arch;
  AttentionImpl attn;
  double dropout;
};

ModelConfig model(const Config& c, int layers = 4) { return test::tiny(c.arch, c.attn, c.dropout, layers); }

class PolicyBudgetModel : public ::testing::TestWithParam<Config> {};

TEST_P(PolicyBudgetModel, ChainModelAgreesWithTheSimulatorForEveryChoice) {
  const ModelConfig m = model(GetParam());
  BlockGraph g(m);
  // The default selective set, sets whose recompute makes temporaries next to kept tensors
  // (flash: attn.ctx without attn.lse) or chains of steps, and everything but the input.
  std::vector<std::string> all;
  for (const auto& n : g.saved_names())
    if (n != "block.in") all.push_back(n);
  const std::vector<std::vector<std::string>> sets = {
      g.default_selective(), {"attn.ctx"}, {"ln1.out", "attn.qkv"}, {"ln2.in", "mlp.res_mask"}, all};
  for (const auto& sel : sets) {
    ChainSpec spec = chain_from_graph(g, test::forward_flops(g), m.layers, sel, true);  // FLOPs by each block's window
    std::vector<int> choice(static_cast<std::size_t>(m.layers));
    for (int k = 0; k < 81; ++k) {
      for (int b = 0, x = k; b < m.layers; ++b, x /= 3) choice[static_cast<std::size_t>(b)] = x % 3;
      Schedule s = schedule_for(g, spec, choice);
      Prediction p = simulate(m, s, nullptr);
      std::string what = sel.front() + " ";
      for (int o : choice) what += option_name(o)[0];
      EXPECT_EQ(chain_peak(spec.chain, choice), p.activation_peak_bytes) << what;
      EXPECT_EQ(chain_cost(spec.chain, choice), static_cast<double>(p.flops.recompute)) << what;
    }
  }
}

TEST_P(PolicyBudgetModel, NeverWorseThanAFixedPolicyAtItsOwnPeak) {
  const ModelConfig m = model(GetParam(), 6);
  std::vector<std::string> fixed = {"none", "selective"};
  // Blocks of unequal costs (windowed and global) can make a segment recomputed from one
  // checkpoint cheaper at its peak than any mix of budget's three options per block (a segment
  // is not one of them; the optimal policy's tests compare it with uniform plans on such a model).
  for (int k = 1; k <= m.layers && GetParam().arch != Family::Gemma3; ++k)
    fixed.push_back("uniform:segments=" + std::to_string(k));
  for (const auto& p : fixed) {
    Prediction pp = simulate(m, test::plan(p, m), nullptr);
    Schedule b = test::plan("budget", m, pp.activation_peak_bytes);
    Prediction pb = simulate(m, b, nullptr);
    EXPECT_LE(pb.activation_peak_bytes, pp.activation_peak_bytes) << p;
    EXPECT_LE(pb.flops.recompute, pp.flops.recompute) << p;
  }
}

TEST_P(PolicyBudgetModel, RefusesBelowTheSmallestFeasibleBudgetAndFitsIt) {
  const ModelConfig m = model(GetParam());
  std::string msg;
  try {
    test::plan("budget", m, 1000);
  } catch (const std::exception& e) {
    msg = e.what();
  }
  auto at = msg.find("smallest feasible budget is ");
  ASSERT_NE(at, std::string::npos) << msg;
  const std::uint64_t least = std::stoull(msg.substr(at + 28));
  Schedule s = test::plan("budget", m, least);
  EXPECT_EQ(simulate(m, s, nullptr).activation_peak_bytes, least);
  EXPECT_THROW(test::plan("budget", m, least - 1), Error);
  // A budget at none's peak stores everything.
  const std::uint64_t all = simulate(m, test::plan("none", m), nullptr).activation_peak_bytes;
  EXPECT_EQ(simulate(m, test::plan("budget", m, all), nullptr).flops.recompute, 0u);
  // Without a budget it says what it needs.
  EXPECT_THROW(test::plan("budget", m), Error);
}

INSTANTIATE_TEST_SUITE_P(
    PolicyBudgetConfigs, PolicyBudgetModel,
    ::testing::Values(Config{Family::Gpt2, AttentionImpl::Naive, 0.1},
                      Config{Family::Gpt2, AttentionImpl::Flash, 0.1},
                      Config{Family::Llama, AttentionImpl::Naive, 0.1},
                      Config{Family::Llama, AttentionImpl::Flash, 0.1},
                      Config{Family::Gpt2, AttentionImpl::Naive, 0.0},
                      Config{Family::Llama, AttentionImpl::Flash, 0.0},
                      Config{Family::Gemma3, AttentionImpl::Naive, 0.1}),
    [](const ::testing::TestParamInfo<Config>& i) {
      return std::string(to_string(i.param.arch)) + "_" + to_string(i.param.attn) +
             (i.param.dropout > 0 ? "_dropout" : "");
    });

TEST(PolicyBudget, ExecutedAtEveryBudgetStepIsBitwiseNone) {
  const ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive, 3);
  Trace base = test::run(m, test::plan("none", m), 1, 0);
  BlockGraph g(m);
  ChainSpec spec = chain_from_graph(g, test::forward_flops(g), m.layers, g.default_selective());
  const std::uint64_t lo = min_budget(spec.chain), hi = base.activation_peak_bytes;
  for (int k = 0; k <= 4; ++k) {
    const std::uint64_t budget = lo + (hi - lo) * static_cast<std::uint64_t>(k) / 4;
    Trace t = test::run(m, test::plan("budget", m, budget), 1, 0);
    EXPECT_LE(t.activation_peak_bytes, budget);
    EXPECT_EQ(t.losses(), base.losses());
    EXPECT_EQ(t.grad_checksum, base.grad_checksum);
  }
}

TEST(PolicyBudget, PlansAThousandBlocks) {
  ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive, 1000);
  BlockGraph g(m);
  ChainSpec spec = chain_from_graph(g, test::forward_flops(g), m.layers, g.default_selective());
  const std::uint64_t lo = min_budget(spec.chain);
  std::vector<int> all_store(1000, Store);
  const std::uint64_t hi = chain_peak(spec.chain, all_store);
  Solution s = solve(spec.chain, (lo + hi) / 2);
  ASSERT_TRUE(s.feasible);
  // Its planning time is a benchmark figure (bench/policy_planning_bench.cpp), not a test.
}

}  // namespace
}  // namespace remat
