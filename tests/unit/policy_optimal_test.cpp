// The optimal policy: each choice's chain figures against the simulator, the front against every
// choice, the chain program with fronts of any size against brute force, the whole plan against
// brute force over every choice of every block, the minimum cut against every choice that
// reruns no weight GEMM, its plans against the other policies at their own peaks, and its runs
// against none, bit for bit.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "plugins/budget/budget_chain.h"
#include "plugins/budget/budget_dp.h"
#include "plugins/optimal/fronts.h"
#include "plugins/optimal/min_cut.h"
#include "plugins/optimal/optimal_options.h"
#include "policy_test_util.h"

namespace remat {
namespace {

using namespace remat::optimal;
using budget::Chain;
using budget::ChainBlock;
using budget::Solution;

struct OptConfig {
  Family arch;
  AttentionImpl attn;
  double dropout;
};

ModelConfig opt_model(const OptConfig& c, int layers) { return test::tiny(c.arch, c.attn, c.dropout, layers); }

// The smallest budget the optimal policy names when it refuses one byte.
std::uint64_t smallest_named(const ModelConfig& m) {
  std::string msg;
  try {
    test::plan("optimal", m, 1);
  } catch (const std::exception& e) {
    msg = e.what();
  }
  const auto at = msg.find("smallest feasible budget is ");
  EXPECT_NE(at, std::string::npos) << msg;
  return at == std::string::npos ? 0 : std::stoull(msg.substr(at + 28));
}

// The chain of one choice per block, with the model's outer bytes.
Chain chain_of(const BlockGraph& g, const std::vector<Choice>& pick) {
  Chain c = budget::outer_chain(g);
  for (std::size_t b = 0; b < pick.size(); ++b) {
    ChainBlock blk;
    blk.opt = {b + 1 == pick.size() ? pick[b].last : pick[b].mid};
    c.blocks.push_back(blk);
  }
  return c;
}

// Every choice of block b (its table's, costed by its window's FLOPs).
std::vector<Choice> choices_of(const BlockGraph& g, int b) {
  const int t = g.table_index(b);
  return all_choices(g.table(t), budget::step_costs(g, t, g.windowed(b), {}, true));
}

class PolicyOptimalModel : public ::testing::TestWithParam<OptConfig> {};

TEST_P(PolicyOptimalModel, EveryChoiceWalksAsTheSimulatorRunsIt) {
  const ModelConfig m = opt_model(GetParam(), GetParam().arch == Family::SmolLM3 ? 4 : 3);
  const BlockGraph g(m);
  std::vector<std::vector<Choice>> all;
  for (int b = 0; b < m.layers; ++b) all.push_back(choices_of(g, b));
  std::mt19937_64 rng(7);
  const std::vector<int> zero(static_cast<std::size_t>(m.layers), 0);
  for (int k = 0; k < 120; ++k) {
    std::vector<Choice> pick;
    for (int b = 0; b < m.layers; ++b) {
      const auto& c = all[static_cast<std::size_t>(b)];
      // The first rounds: every block the same choice, from both ends of the list.
      const std::size_t i = k < 8 ? (k % 2 ? c.size() - 1 - static_cast<std::size_t>(k) : static_cast<std::size_t>(k))
                                  : std::uniform_int_distribution<std::size_t>(0, c.size() - 1)(rng);
      pick.push_back(c[i]);
    }
    const Prediction p = simulate(m, schedule_of(g, pick), nullptr);
    const Chain c = chain_of(g, pick);
    EXPECT_EQ(budget::chain_peak(c, zero), p.activation_peak_bytes) << "round " << k;
    EXPECT_EQ(budget::chain_cost(c, zero), static_cast<double>(p.flops.recompute)) << "round " << k;
  }
  // The front: each choice is matched or beaten by one of it, in all three figures (the last
  // block: in its peak and cost); none of it by another of it.
  for (const auto& c : all)
    for (bool last : {false, true}) {
      const std::vector<Choice> f = front(c, last);
      auto fig = [last](const Choice& x) -> const budget::OptionCost& { return last ? x.last : x.mid; };
      for (const Choice& x : c) {
        bool covered = false;
        for (const Choice& y : f) covered = covered || covers(fig(y), fig(x), last);
        ASSERT_TRUE(covered);
      }
      for (std::size_t i = 0; i < f.size(); ++i)
        for (std::size_t j = 0; j < f.size(); ++j) ASSERT_TRUE(i == j || !covers(fig(f[i]), fig(f[j]), last));
    }
}

// Of the choices that rerun no weight GEMM, the fewest kept bytes, and that the cut's is one.
TEST_P(PolicyOptimalModel, MinimumCutKeepsTheFewestBytesWithoutRerunningAWeightGemm) {
  const ModelConfig m = opt_model(GetParam(), 4);
  const BlockGraph g(m);
  for (int i = 0; i < g.table_count(); ++i) {
    const BlockGraph& t = g.table(i);
    const MinCut cut = min_cut(t);
    std::uint64_t least = ~std::uint64_t{0};
    bool cut_seen = false;
    const std::vector<double> cost = test::forward_flops(t);
    for (const Choice& c : all_choices(t, cost)) {
      if (c.mode != Mode::Inside) continue;
      const std::vector<bool> reruns = evaluate(t, cost, c.mode, c.keep).reruns;
      bool gemm = false;
      for (std::size_t s = 0; s < t.steps().size(); ++s) gemm = gemm || (reruns[s] && t.steps()[s].kind == StepKind::Gemm);
      if (gemm) continue;
      least = std::min(least, budget::mask_bytes(t, c.keep));
      cut_seen = cut_seen || c.keep == cut.keep;
    }
    EXPECT_TRUE(cut_seen);
    EXPECT_EQ(cut.bytes, least);
    EXPECT_EQ(budget::mask_bytes(t, cut.keep), cut.bytes);
  }
}

TEST_P(PolicyOptimalModel, NeverWorseThanAnotherPolicyAtItsOwnPeak) {
  const ModelConfig m = opt_model(GetParam(), 5);
  const std::vector<std::string> fixed = {"none", "selective", "selective:modules=core_attn+mlp", "optimal",
                                          "block:layers=2", "uniform:segments=2"};
  for (const auto& p : fixed) {
    const Prediction pp = simulate(m, test::plan(p, m), nullptr);
    const Prediction po = simulate(m, test::plan("optimal", m, pp.activation_peak_bytes), nullptr);
    EXPECT_LE(po.activation_peak_bytes, pp.activation_peak_bytes) << p;
    EXPECT_LE(po.flops.recompute, pp.flops.recompute) << p;
  }
  // Against budget at budgets between its smallest and none's peak.
  const std::uint64_t hi = simulate(m, test::plan("none", m), nullptr).activation_peak_bytes;
  for (int k = 1; k <= 2; ++k) {
    const std::uint64_t at = hi * static_cast<std::uint64_t>(2 + k) / 4;
    std::optional<Prediction> pb;
    try {
      pb = simulate(m, test::plan("budget", m, at), nullptr);
    } catch (const Error&) {
    }
    const Prediction po = simulate(m, test::plan("optimal", m, at), nullptr);
    EXPECT_LE(po.activation_peak_bytes, at);
    if (pb) EXPECT_LE(po.flops.recompute, pb->flops.recompute) << at;
  }
}

TEST_P(PolicyOptimalModel, RefusesBelowTheSmallestFeasibleBudgetAndFitsIt) {
  const ModelConfig m = opt_model(GetParam(), 3);
  const std::uint64_t least = smallest_named(m);
  ASSERT_GT(least, 0u);
  EXPECT_EQ(simulate(m, test::plan("optimal", m, least), nullptr).activation_peak_bytes, least);
  EXPECT_THROW(test::plan("optimal", m, least - 1), Error);
  const std::uint64_t all = simulate(m, test::plan("none", m), nullptr).activation_peak_bytes;
  EXPECT_EQ(simulate(m, test::plan("optimal", m, all), nullptr).flops.recompute, 0u);
}

// Every choice all_choices walks on masks, sharing walks between modes, has evaluate()'s
// figures exactly (costs as evaluate adds them), on every table of dense, windowed, expert and
// latent-attention models, with dropout and without.
TEST(PolicyOptimal, EveryChoiceHasTheFiguresOfItsOwnWalk) {
  const std::vector<OptConfig> configs = {
      {Family::Gpt2, AttentionImpl::Naive, 0.1},        {Family::Llama, AttentionImpl::Flash, 0.1},
      {Family::Gemma3, AttentionImpl::Flash, 0.0},      {Family::Qwen3Moe, AttentionImpl::Naive, 0.1},
      {Family::DeepseekV3, AttentionImpl::Flash, 0.0},  {Family::DeepseekV2, AttentionImpl::Flash, 0.1}};
  auto same = [](const budget::OptionCost& a, const budget::OptionCost& b) {
    return a.kept == b.kept && a.fwd_peak == b.fwd_peak && a.bwd_peak == b.bwd_peak && a.cost == b.cost;
  };
  for (const OptConfig& oc : configs) {
    const ModelConfig m = opt_model(oc, 2);
    const BlockGraph g(m);
    std::set<std::pair<int, bool>> seen;  // each table once, with the window and without
    for (int b = 0; b < m.layers; ++b) {
      const int t = g.table_index(b);
      if (!seen.insert({t, g.windowed(b)}).second) continue;
      const std::vector<double> cost = budget::step_costs(g, t, g.windowed(b), {}, true);
      // 2^n subsets: each Inside, all but the input alone as a checkpoint, all but the whole set Before.
      const std::size_t n = std::size_t{1} << (__builtin_popcountll(budget::saved_mask(g.table(t))) - 1);
      const std::size_t total = 3 * n - 2;
      const bool small = total <= (std::size_t{3} << 15);
      std::vector<Choice> all;  // of small tables, for their fronts below
      std::size_t n_modes[3] = {0, 0, 0}, i = 0, wrong = 0;
      // Every choice of small tables; of large ones every 61st and the first and last 300.
      for_each_choice(g.table(t), cost, [&](const Choice& c, std::uint64_t) {
        ++n_modes[static_cast<int>(c.mode)];
        if (small) all.push_back(c);
        const std::size_t at = i++;
        if (total > 6000 && at % 61 != 0 && at >= 300 && at + 300 < total) return;
        const Choice e = evaluate(g.table(t), cost, c.mode, c.keep);
        const bool agree = c.keep == e.keep && c.inside == e.inside && same(c.mid, e.mid) && same(c.last, e.last);
        if (!agree && ++wrong <= 5)
          ADD_FAILURE() << to_string(oc.arch) << " block " << b << " mode " << static_cast<int>(c.mode) << " keep " << c.keep;
      });
      EXPECT_EQ(wrong, 0u) << to_string(oc.arch) << " block " << b;
      EXPECT_EQ(i, total) << to_string(oc.arch);
      EXPECT_EQ(n_modes[0], n) << to_string(oc.arch);
      EXPECT_EQ(n_modes[1], n - 1) << to_string(oc.arch);
      EXPECT_EQ(n_modes[2], n - 1) << to_string(oc.arch);
      EXPECT_GT(n, 8u) << to_string(oc.arch);
      // The fronts found by sorting and sweeping records are front()'s over every choice (which
      // takes choices x front: the small tables).
      if (!small) continue;
      const Fronts fr = fronts(g.table(t), cost);
      for (bool last : {false, true}) {
        const std::vector<Choice> want = front(all, last), &got = last ? fr.last : fr.mid;
        ASSERT_EQ(got.size(), want.size()) << to_string(oc.arch) << " block " << b << (last ? " last" : " middle");
        for (std::size_t k = 0; k < want.size(); ++k) {
          EXPECT_EQ(got[k].keep, want[k].keep) << k;
          EXPECT_EQ(got[k].mode, want[k].mode) << k;
          EXPECT_TRUE(same(got[k].mid, want[k].mid) && same(got[k].last, want[k].last)) << k;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    PolicyOptimalConfigs, PolicyOptimalModel,
    ::testing::Values(OptConfig{Family::Gpt2, AttentionImpl::Naive, 0.1}, OptConfig{Family::Gpt2, AttentionImpl::Flash, 0.1},
                      OptConfig{Family::Llama, AttentionImpl::Naive, 0.0}, OptConfig{Family::Llama, AttentionImpl::Flash, 0.1},
                      OptConfig{Family::SmolLM3, AttentionImpl::Flash, 0.0}, OptConfig{Family::Gemma3, AttentionImpl::Flash, 0.0}),
    [](const ::testing::TestParamInfo<OptConfig>& i) {
      return std::string(to_string(i.param.arch)) + "_" + to_string(i.param.attn) + (i.param.dropout > 0 ? "_dropout" : "");
    });

// Brute force over option indices of a chain whose blocks have any number of options.
Solution brute_force_any(const Chain& c, std::uint64_t budget) {
  Solution best;
  std::vector<int> choice(c.blocks.size(), 0);
  for (;;) {
    bool ok = true;
    for (std::size_t b = 0; b < c.blocks.size(); ++b) ok = ok && c.blocks[b].opt[static_cast<std::size_t>(choice[b])].allowed;
    if (ok) {
      const std::uint64_t peak = budget::chain_peak(c, choice);
      const double cost = budget::chain_cost(c, choice);
      if (peak <= budget && (!best.feasible || cost < best.cost)) best = {true, choice, cost, peak};
    }
    std::size_t b = 0;
    while (b < c.blocks.size() && ++choice[b] == static_cast<int>(c.blocks[b].opt.size())) choice[b++] = 0;
    if (b == c.blocks.size()) return best;
  }
}

TEST(PolicyOptimal, ChainProgramWithFrontsOfAnySizeMatchesBruteForce) {
  std::mt19937_64 rng(35);
  std::uniform_int_distribution<int> small(1, 40), cost(0, 50), count(1, 7), coin(0, 6);
  int checked = 0;
  for (int L = 1; L <= 6; ++L)
    for (int rep = 0; rep < 30; ++rep) {
      Chain c;
      c.base = static_cast<std::uint64_t>(small(rng) % 5);
      c.floor = static_cast<std::uint64_t>(small(rng));
      for (int b = 0; b < L; ++b) {
        ChainBlock blk;
        blk.opt.assign(static_cast<std::size_t>(count(rng)), {});
        for (auto& x : blk.opt) {
          x.kept = static_cast<std::uint64_t>(small(rng));
          x.fwd_peak = x.kept + static_cast<std::uint64_t>(small(rng));
          x.bwd_peak = static_cast<std::uint64_t>(small(rng));
          x.cost = static_cast<double>(cost(rng));
          x.allowed = coin(rng) != 0;
        }
        c.blocks.push_back(blk);
      }
      const Solution any = brute_force_any(c, ~std::uint64_t{0});
      const std::uint64_t least = budget::min_budget(c);
      if (!any.feasible) {
        EXPECT_EQ(least, ~std::uint64_t{0});
        continue;
      }
      EXPECT_TRUE(brute_force_any(c, least).feasible);
      EXPECT_FALSE(brute_force_any(c, least - 1).feasible);
      std::vector<int> at_least;
      budget::min_budget(c, &at_least);
      EXPECT_EQ(budget::chain_peak(c, at_least), least);
      for (std::uint64_t budget : {least, least + 7, least + 40, least + 150}) {
        const Solution dp = budget::solve(c, budget), bf = brute_force_any(c, budget);
        ASSERT_EQ(dp.feasible, bf.feasible);
        ASSERT_EQ(dp.cost, bf.cost) << "L=" << L << " budget=" << budget;
        EXPECT_EQ(budget::chain_cost(c, dp.choice), dp.cost);
        // The bounds the program prunes with: a fitting choice's cost at or above the optimum,
        // and along an optimal choice, what its later blocks cost at or above the bound on them.
        EXPECT_GE(budget::detail::greedy_bound(c, budget), bf.cost);
        const budget::detail::RestBound rest(c, budget - c.base);
        std::uint64_t kept = 0;
        double spent = 0.0;
        for (std::size_t b = 0; b + 1 < c.blocks.size(); ++b) {
          kept += c.blocks[b].opt[static_cast<std::size_t>(bf.choice[b])].kept;
          spent += c.blocks[b].opt[static_cast<std::size_t>(bf.choice[b])].cost;
          EXPECT_LE(spent + rest.at(b, kept), bf.cost + 1e-9) << "L=" << L << " block " << b;
        }
        for (std::size_t b = 0; b < c.blocks.size(); ++b) EXPECT_TRUE(c.blocks[b].opt[static_cast<std::size_t>(dp.choice[b])].allowed);
        EXPECT_LE(budget::chain_peak(c, dp.choice), budget);
        ++checked;
      }
    }
  EXPECT_GT(checked, 500);
}

// Runs of one block repeated, as a model's layers are: the same options in another order over
// earlier blocks give equal states by the thousand, which the program drops as it goes (the
// costliest options tried first, a state beaten by those merged so far skipped in bulk). Its
// cost against brute force, and the bound on later blocks walked along rising kept bytes equal
// to the one searched for.
TEST(PolicyOptimal, ChainProgramOnRepeatedBlocksMatchesBruteForce) {
  std::mt19937_64 rng(61);
  std::uniform_int_distribution<int> small(1, 40), cost(0, 12), count(2, 6), copies(2, 6), coin(0, 7);
  auto random_block = [&] {
    ChainBlock blk;
    blk.opt.assign(static_cast<std::size_t>(count(rng)), {});
    for (auto& x : blk.opt) {
      x.kept = static_cast<std::uint64_t>(small(rng) % 8);  // few distinct sums: many equal states
      x.fwd_peak = x.kept + static_cast<std::uint64_t>(small(rng));
      x.bwd_peak = static_cast<std::uint64_t>(small(rng));
      x.cost = static_cast<double>(cost(rng));
      x.allowed = coin(rng) != 0;
    }
    return blk;
  };
  int checked = 0;
  for (int rep = 0; rep < 60; ++rep) {
    Chain c;
    c.base = static_cast<std::uint64_t>(small(rng) % 5);
    c.floor = static_cast<std::uint64_t>(small(rng));
    if (rep % 3 == 0) c.blocks.push_back(random_block());  // a different first block (dense layers)
    const ChainBlock repeated = random_block();
    for (int k = copies(rng); k > 0; --k) c.blocks.push_back(repeated);
    c.blocks.push_back(random_block());  // the last block, with the head
    const std::uint64_t least = budget::min_budget(c);
    if (least == ~std::uint64_t{0}) continue;
    const Solution most = brute_force_any(c, ~std::uint64_t{0});
    for (std::uint64_t budget : {least, least + 3, least + 11, least + 25, least + 60, most.peak}) {
      const Solution dp = budget::solve(c, budget), bf = brute_force_any(c, budget);
      ASSERT_EQ(dp.feasible, bf.feasible) << "rep " << rep << " budget " << budget;
      if (!dp.feasible) continue;
      ASSERT_EQ(dp.cost, bf.cost) << "rep " << rep << " budget " << budget;
      EXPECT_EQ(budget::chain_cost(c, dp.choice), dp.cost);
      EXPECT_EQ(dp.peak, budget::chain_peak(c, dp.choice));
      EXPECT_LE(dp.peak, budget);
      const budget::detail::RestBound rest(c, budget - c.base);
      for (std::size_t b = 0; b + 1 < c.blocks.size(); ++b) {
        std::size_t hint = budget::detail::RestBound::kNoHint;
        for (std::uint64_t kept = 0; kept <= budget + 5; kept += 1 + kept % 3)
          ASSERT_EQ(rest.at(b, kept, &hint), rest.at(b, kept)) << "block " << b << " kept " << kept;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 150);
}

// The whole plan against every choice of every block (not only the fronts): a 2-block model
// small enough to try them all.
TEST(PolicyOptimal, PlanIsTheCheapestOfEveryChoiceOfEveryBlock) {
  const ModelConfig m = opt_model({Family::Llama, AttentionImpl::Naive, 0.0}, 2);
  const BlockGraph g(m);
  const std::vector<Choice> all = choices_of(g, 0);
  const Chain outer = chain_of(g, {});
  std::vector<std::pair<std::uint64_t, double>> every;  // (peak, cost) of each pair of choices
  for (const Choice& a : all)
    for (const Choice& b : all) {
      Chain c = outer;
      c.blocks = {ChainBlock{{a.mid}}, ChainBlock{{b.last}}};
      every.push_back({budget::chain_peak(c, {0, 0}), a.mid.cost + b.last.cost});
    }
  std::uint64_t lo = ~std::uint64_t{0}, hi = 0;
  for (const auto& [p, c] : every) lo = std::min(lo, p), hi = std::max(hi, p);
  for (int k = 0; k <= 12; ++k) {
    const std::uint64_t at = lo + (hi - lo) * static_cast<std::uint64_t>(k) / 12;
    double best = 1e300;
    for (const auto& [p, c] : every)
      if (p <= at) best = std::min(best, c);
    const Prediction po = simulate(m, test::plan("optimal", m, at), nullptr);
    EXPECT_EQ(static_cast<double>(po.flops.recompute), best) << at;
    EXPECT_LE(po.activation_peak_bytes, at);
  }
}

TEST(PolicyOptimal, MinimumCutOfGpt2KeepsLessThanKorthikantisSet) {
  for (AttentionImpl attn : {AttentionImpl::Naive, AttentionImpl::Flash}) {
    const ModelConfig m = test::tiny(Family::Gpt2, attn, 2);
    const BlockGraph g(m);
    const std::vector<std::string> want = {"block.in", "attn.qkv", "ln2.in", "mlp.gelu_in"};
    const Schedule s = test::plan("optimal", m);
    ASSERT_EQ(s.actions.front().keep.kind, KeepKind::Named);
    EXPECT_EQ(*s.actions.front().keep.names, want);
    std::uint64_t ours = 0;
    for (const auto& n : want) ours += g.tensors()[static_cast<std::size_t>(*g.find(n))].bytes;
    EXPECT_EQ(ours, min_cut(g).bytes);
    EXPECT_LT(ours, g.saved_bytes_without(g.default_selective()));
  }
}

// The minimum cut of expert and latent-attention blocks (docs/policies.md's rows): every weight
// GEMM's output the backward reads (the router's logits, the experts' gate_up and down outputs,
// the shared experts', the latents before their norms, the packed heads) and the residual
// after attention; the routing, the dispatched rows, the activations, the norms' outputs and
// the attention core are rebuilt inside the backward.
TEST(PolicyOptimal, MinimumCutOfExpertAndLatentBlocks) {
  const std::vector<std::string> moe = {"block.in", "attn.qkv", "ln2.in", "moe.logits", "moe.gate_up", "moe.down_out"};
  const std::vector<std::string> qwen_moe = {"block.in", "attn.qkv_raw", "ln2.in", "moe.logits", "moe.gate_up", "moe.down_out"};
  const std::vector<std::string> ds_dense = {"block.in", "attn.q_a_out", "attn.kv_a_out", "attn.qkv", "ln2.in", "mlp.gate_up"};
  const std::vector<std::string> ds_moe = {"block.in",   "attn.q_a_out", "attn.kv_a_out", "attn.qkv",      "ln2.in",
                                           "moe.logits", "moe.gate_up",  "moe.down_out",  "moe.shared_gate_up"};
  struct Case {
    Family arch;
    int block;
    const std::vector<std::string>* want;
  };
  for (const Case& c : {Case{Family::Mixtral, 0, &moe}, Case{Family::Qwen3Moe, 0, &qwen_moe},
                        Case{Family::DeepseekV3, 0, &ds_dense}, Case{Family::DeepseekV3, 1, &ds_moe}}) {
    const ModelConfig m = test::tiny(c.arch, AttentionImpl::Flash, 0.0, 2);
    const BlockGraph g(m);
    const Schedule s = test::plan("optimal", m);
    const Action* fwd = nullptr;
    for (const Action& a : s.actions)
      if (a.kind == ActionKind::Forward && a.block == c.block) fwd = &a;
    ASSERT_NE(fwd, nullptr);
    ASSERT_EQ(fwd->keep.kind, KeepKind::Named) << to_string(c.arch);
    EXPECT_EQ(*fwd->keep.names, *c.want) << to_string(c.arch) << " block " << c.block;
    const BlockGraph& t = g.of(c.block);
    std::uint64_t bytes = 0;
    for (const auto& n : *c.want) bytes += t.tensors()[static_cast<std::size_t>(t.find(n).value())].bytes;
    EXPECT_EQ(bytes, min_cut(t).bytes) << to_string(c.arch);
  }
}

TEST(PolicyOptimal, RunsAreBitwiseNoneAtEveryBudget) {
  const ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive, 3);
  const Trace base = test::run(m, test::plan("none", m), 1, 0);
  const std::uint64_t lo = smallest_named(m), hi = base.activation_peak_bytes;
  ASSERT_GT(lo, 0u);
  for (int k = -1; k <= 3; ++k) {
    const Schedule s = k < 0 ? test::plan("optimal", m) : test::plan("optimal", m, lo + (hi - lo) * static_cast<std::uint64_t>(k) / 3);
    const Trace t = test::run(m, s, 1, 0);
    EXPECT_EQ(t.activation_peak_bytes, simulate(m, s, nullptr).activation_peak_bytes) << k;
    EXPECT_EQ(t.losses(), base.losses()) << k;
    EXPECT_EQ(t.grad_checksum, base.grad_checksum) << k;
  }
}

// The choice each block of a plan took, read back from its actions, among `all` (keyed by mode
// and kept set).
std::vector<Choice> choices_in(const BlockGraph& g, const Schedule& s, const std::vector<Choice>& all) {
  std::vector<Choice> out;
  for (int b = 0; b < s.blocks; ++b) {
    Mask fwd = 0, rec = 0;
    bool recompute = false, rec_all = false;
    auto mask = [&](const Keep& k) {
      Mask m = 0;
      if (k.kind == KeepKind::Input) return budget::bit(g.input());
      for (std::size_t t = 0; t < g.tensors().size(); ++t)
        if (g.tensors()[t].saved && (k.kind == KeepKind::All || std::count(k.names->begin(), k.names->end(), g.tensors()[t].name)))
          m |= budget::bit(static_cast<int>(t));
      return m;
    };
    for (const Action& a : s.actions) {
      if (a.block != b) continue;
      if (a.kind == ActionKind::Forward) fwd = mask(a.keep);
      if (a.kind == ActionKind::Recompute) recompute = true, rec_all = a.keep.kind == KeepKind::All, rec = mask(a.keep);
    }
    const Mode mode = !recompute ? Mode::Inside : rec_all ? Mode::Before : Mode::Checkpoint;
    const Mask keep = mode == Mode::Checkpoint ? rec : fwd;
    for (const Choice& c : all)
      if (c.mode == mode && c.keep == keep) {
        out.push_back(c);
        break;
      }
    EXPECT_EQ(out.size(), static_cast<std::size_t>(b + 1)) << "block " << b << " took no choice of the list";
  }
  return out;
}

double cost_of(const std::vector<Choice>& pick) {
  double c = 0.0;
  for (const Choice& x : pick) c += x.mid.cost;
  return c;
}

// Given step costs (measured times, here the softmax far dearer than its FLOPs say) change the
// plan, and it is the cheapest under them.
TEST(PolicyOptimal, GivenCostsPlanForTheMachineTheyCameFrom) {
  const ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive, 4);
  const BlockGraph g(m);
  std::vector<double> heavy;
  for (const auto& st : g.steps()) heavy.push_back(st.kind == StepKind::Softmax ? 1e9 : 1.0);
  const StepCosts given{heavy, "ns (test)"};
  const std::vector<Choice> by_time = all_choices(g, heavy);
  auto chain_for = [&](const std::vector<double>& cost) {
    const std::vector<Choice> all = all_choices(g, cost), mid = front(all, false), last = front(all, true);
    Chain c = chain_of(g, {});
    for (int b = 0; b < m.layers; ++b) {
      ChainBlock blk;
      blk.opt.clear();
      for (const Choice& x : b + 1 == m.layers ? last : mid) blk.opt.push_back(b + 1 == m.layers ? x.last : x.mid);
      c.blocks.push_back(blk);
    }
    return c;
  };
  const Chain timed = chain_for(heavy);
  const std::uint64_t lo = budget::min_budget(timed), hi = simulate(m, test::plan("none", m), nullptr).activation_peak_bytes;
  int differ = 0;
  for (int k = 1; k < 8; ++k) {
    const std::uint64_t at = lo + (hi - lo) * static_cast<std::uint64_t>(k) / 8;
    const Schedule flops_plan = test::plugins().plan({"optimal", {}}, m, at);
    const Schedule time_plan = test::plugins().plan({"optimal", {}}, m, at, &given);
    const double best = budget::solve(timed, at).cost, got = cost_of(choices_in(g, time_plan, by_time));
    EXPECT_DOUBLE_EQ(got, best) << at;
    EXPECT_LE(got, cost_of(choices_in(g, flops_plan, by_time))) << at;
    EXPECT_LE(simulate(m, time_plan, nullptr).activation_peak_bytes, at);
    differ += got < cost_of(choices_in(g, flops_plan, by_time));
  }
  EXPECT_GT(differ, 0);  // the costs made a difference somewhere
}

// Several budgets planned in one go (one child process, the choices walked once) give, budget
// by budget, what planning each alone gives: the same schedule, or the same refusal naming the
// smallest feasible budget; for the optimal policy (its own plan_budgets) and for budget (the
// interface's loop).
TEST(PolicyOptimal, PlansSeveralBudgetsAsEachAlone) {
  for (const char* policy : {"optimal", "budget"})
    for (const OptConfig& oc : {OptConfig{Family::Gemma3, AttentionImpl::Flash, 0.0},
                                OptConfig{Family::Llama, AttentionImpl::Naive, 0.1}}) {
      const ModelConfig m = opt_model(oc, 3);
      const BlockGraph g(m);
      const std::uint64_t all = simulate(m, test::plan("none", m), nullptr).activation_peak_bytes;
      std::uint64_t least = 0;
      try {
        test::plan(policy, m, 1);
      } catch (const Error& e) {
        const std::string what = e.what(), key = "smallest feasible budget is ";
        ASSERT_NE(what.find(key), std::string::npos) << what;
        least = std::stoull(what.substr(what.find(key) + key.size()));
      }
      ASSERT_GT(least, 0u);
      const std::vector<std::uint64_t> budgets = {all, least - 1, least, least + (all - least) / 3, 1, (least + all) / 2};
      const std::vector<BudgetedPlan> got = test::plugins().plan_budgets({policy, {}}, g, budgets);
      ASSERT_EQ(got.size(), budgets.size());
      for (std::size_t i = 0; i < budgets.size(); ++i) {
        if (budgets[i] < least) {
          EXPECT_FALSE(got[i].schedule) << policy << " " << budgets[i];
          EXPECT_NE(got[i].error.find("smallest feasible budget is " + std::to_string(least) + " bytes"), std::string::npos)
              << got[i].error;
          continue;
        }
        ASSERT_TRUE(got[i].schedule) << policy << " " << budgets[i] << ": " << got[i].error;
        EXPECT_EQ(schedule_to_json(*got[i].schedule), schedule_to_json(test::plan(policy, m, budgets[i])))
            << policy << " " << to_string(oc.arch) << " at " << budgets[i];
      }
    }
}

}  // namespace
}  // namespace remat
