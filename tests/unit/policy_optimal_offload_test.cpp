// The optimal policy's offloads (plugins/optimal/offload_sets.h): every distinct offloaded byte
// count of every kept set, the fronts with offloads against every choice with every offload,
// picks with offloads walked as the simulator runs them, the plan against brute force over
// pairs of blocks, and runs with offloads against none, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "plugins/budget/budget_chain.h"
#include "plugins/budget/budget_dp.h"
#include "plugins/optimal/fronts.h"
#include "plugins/optimal/offload_sets.h"
#include "plugins/optimal/optimal_options.h"
#include "policy_test_util.h"

namespace remat {
namespace {

using namespace remat::optimal;
using budget::bit;
using budget::Mask;

std::vector<int> off_free(const BlockGraph& g) { return optimal::free_tensors(g); }

// Every choice of g with every subset of what it holds between its forward and backward
// offloaded (a checkpoint holds its input alone), at `per_byte` a byte.
std::vector<Choice> off_every(const BlockGraph& g, const std::vector<double>& cost, double per_byte) {
  std::vector<Choice> out;
  for (const Choice& c : all_choices(g, cost)) {
    const Mask held = c.mode == Mode::Checkpoint ? bit(g.input()) : c.keep;
    for (Mask o = held;; o = (o - 1) & held) {  // every subset of held
      out.push_back(offloaded(g, c, o, per_byte));
      if (o == 0) break;
    }
  }
  return out;
}

// Block b's step costs: its table's FLOPs in its window.
std::vector<double> off_cost(const BlockGraph& g, int b) {
  const int t = g.table_index(b);
  return budget::step_costs(g, t, g.windowed(b), {}, true);
}

// The figures of each choice as a middle block (or the last: its peak and cost), sorted.
std::vector<std::tuple<std::uint64_t, std::uint64_t, double>> off_figures(const std::vector<Choice>& f, bool last = false) {
  std::vector<std::tuple<std::uint64_t, std::uint64_t, double>> v;
  for (const Choice& c : f)
    if (last) v.emplace_back(0, c.last.peak(), c.last.cost);
    else v.emplace_back(c.mid.kept, c.mid.peak(), c.mid.cost);
  std::sort(v.begin(), v.end());
  return v;
}

// Bytes a schedule offloads, summed over its offload actions (each names what it moves).
std::uint64_t off_bytes(const BlockGraph& model, const Schedule& s) {
  std::uint64_t n = 0;
  for (const Action& a : s.actions)
    if (a.kind == ActionKind::Offload)
      for (const auto& name : *a.keep.names)
        n += model.of(a.block).tensors()[static_cast<std::size_t>(*model.of(a.block).find(name))].bytes;
  return n;
}

TEST(PolicyOptimalOffload, EveryKeptSetHasEveryDistinctOffloadedByteCount) {
  const BlockGraph g(test::tiny(Family::Gpt2, AttentionImpl::Naive, 0.1, 2));
  const std::vector<int> free = off_free(g);
  ASSERT_GE(free.size(), 10u);
  std::uint64_t visited = 0;
  for_each_kept_set(g, free, [&](std::uint64_t k, const Offloads& offs) {
    ++visited;
    Mask keep = bit(g.input());
    for (std::size_t i = 0; i < free.size(); ++i)
      if ((k >> i) & 1u) keep |= bit(free[i]);
    std::set<std::uint64_t> want;
    for (Mask o = keep;; o = (o - 1) & keep) {
      want.insert(budget::mask_bytes(g, o));
      if (o == 0) break;
    }
    ASSERT_EQ(offs.size(), want.size()) << k;
    std::size_t i = 0;
    for (std::uint64_t b : want) {
      EXPECT_EQ(offs[i].bytes, b) << k;
      EXPECT_EQ(offs[i].tensors & ~keep, 0u) << k;  // a subset of what the block keeps
      EXPECT_EQ(budget::mask_bytes(g, offs[i].tensors), b) << k;
      ++i;
    }
  });
  EXPECT_EQ(visited, std::uint64_t{1} << free.size());
}

class PolicyOptimalOffloadModel : public ::testing::TestWithParam<std::tuple<Family, AttentionImpl, double>> {
 protected:
  ModelConfig model(int layers) const {
    return test::tiny(std::get<0>(GetParam()), std::get<1>(GetParam()), std::get<2>(GetParam()), layers);
  }
};

TEST_P(PolicyOptimalOffloadModel, FrontIsThatOfEveryChoiceWithEveryOffload) {
  const BlockGraph g(model(2));
  const std::vector<double> cost = test::forward_flops(g);
  const std::vector<Choice> plain = front(all_choices(g, cost), true);
  for (double per_byte : {0.0, 2.0}) {
    const std::vector<Choice> every = off_every(g, cost, per_byte);
    const Fronts f = fronts(g, cost, per_byte);
    EXPECT_EQ(off_figures(f.mid), off_figures(front(every, false))) << per_byte;
    EXPECT_EQ(off_figures(f.last, true), off_figures(plain, true)) << per_byte;  // the last block offloads nothing
    for (const Choice& c : f.last) EXPECT_EQ(c.offload, 0u);
    bool any = false;
    for (const Choice& c : f.mid) {
      // Each member is its choice with its offload: the same figures walked again.
      const Choice again = offloaded(g, evaluate(g, cost, c.mode, c.keep), c.offload, per_byte);
      EXPECT_EQ(again.mid.kept, c.mid.kept);
      EXPECT_EQ(again.mid.peak(), c.mid.peak());
      EXPECT_EQ(again.mid.cost, c.mid.cost);
      any = any || c.offload != 0;
    }
    EXPECT_TRUE(any) << "no member offloads at " << per_byte;
  }
}

TEST_P(PolicyOptimalOffloadModel, PicksWithOffloadsWalkAsTheSimulatorRunsThem) {
  const ModelConfig m = model(3);
  const BlockGraph g(m);
  const double per_byte = 2.0;
  std::vector<std::vector<Choice>> all;
  for (int b = 0; b < 3; ++b)
    all.push_back(b < 2 ? off_every(g.of(b), off_cost(g, b), per_byte) : all_choices(g.of(b), off_cost(g, b)));
  std::mt19937_64 rng(11);
  const std::vector<int> zero(3, 0);
  for (int k = 0; k < 60; ++k) {
    std::vector<Choice> pick;
    for (const auto& c : all) pick.push_back(c[std::uniform_int_distribution<std::size_t>(0, c.size() - 1)(rng)]);
    const Schedule s = schedule_of(g, pick);
    const Prediction p = simulate(m, s, nullptr);
    budget::Chain c = budget::outer_chain(g);
    for (int b = 0; b < 3; ++b) {
      budget::ChainBlock blk;
      blk.opt = {b == 2 ? pick[2].last : pick[static_cast<std::size_t>(b)].mid};
      c.blocks.push_back(blk);
    }
    EXPECT_EQ(budget::chain_peak(c, zero), p.activation_peak_bytes) << "round " << k;
    EXPECT_EQ(budget::chain_cost(c, zero),
              static_cast<double>(p.flops.recompute) + per_byte * static_cast<double>(off_bytes(g, s)))
        << "round " << k;
  }
}

// Against every pair of a first block's choices with offloads (its front, which the test above
// holds to every choice) and a last block's choices.
TEST_P(PolicyOptimalOffloadModel, PlanIsTheCheapestOfEveryPairWithOffloads) {
  const ModelConfig m = model(2);
  const BlockGraph g(m);
  const double per_byte = 2.0;
  const std::vector<Choice> first = front(off_every(g.of(0), off_cost(g, 0), per_byte), false),
                            last = all_choices(g.of(1), off_cost(g, 1));
  budget::Chain outer = budget::outer_chain(g);
  std::vector<std::pair<std::uint64_t, double>> every;
  for (const Choice& a : first)
    for (const Choice& b : last) {
      budget::Chain c = outer;
      c.blocks = {budget::ChainBlock{{a.mid}}, budget::ChainBlock{{b.last}}};
      every.push_back({budget::chain_peak(c, {0, 0}), a.mid.cost + b.last.cost});
    }
  std::uint64_t lo = ~std::uint64_t{0}, hi = 0;
  for (const auto& [p, c] : every) lo = std::min(lo, p), hi = std::max(hi, p);
  for (int k = 0; k <= 8; ++k) {
    const std::uint64_t at = lo + (hi - lo) * static_cast<std::uint64_t>(k) / 8;
    double best = 1e300;
    for (const auto& [p, c] : every)
      if (p <= at) best = std::min(best, c);
    const Schedule s = test::plan("optimal:offload_cost=2", m, at);
    const Prediction po = simulate(m, s, nullptr);
    EXPECT_EQ(static_cast<double>(po.flops.recompute) + per_byte * static_cast<double>(off_bytes(g, s)), best) << at;
    EXPECT_LE(po.activation_peak_bytes, at);
  }
}

INSTANTIATE_TEST_SUITE_P(
    OffloadConfigs, PolicyOptimalOffloadModel,
    ::testing::Values(std::make_tuple(Family::Gpt2, AttentionImpl::Flash, 0.0),
                      std::make_tuple(Family::Llama, AttentionImpl::Flash, 0.1),
                      std::make_tuple(Family::Gemma3, AttentionImpl::Flash, 0.0)),
    [](const auto& i) {
      return std::string(to_string(std::get<0>(i.param))) + "_" + to_string(std::get<1>(i.param)) +
             (std::get<2>(i.param) > 0 ? "_dropout" : "");
    });

// The smallest budget a policy names when it refuses one byte.
std::uint64_t off_smallest(const std::string& policy, const ModelConfig& m) {
  std::string msg;
  try {
    test::plan(policy, m, 1);
  } catch (const std::exception& e) {
    msg = e.what();
  }
  const auto at = msg.find("smallest feasible budget is ");
  EXPECT_NE(at, std::string::npos) << msg;
  return at == std::string::npos ? 0 : std::stoull(msg.substr(at + 28));
}

TEST(PolicyOptimalOffload, RunsWithOffloadsAreBitwiseNone) {
  const ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive, 3);
  const BlockGraph g(m);
  const Trace base = test::run(m, test::plan("none", m), 1, 0);
  const std::uint64_t lo = off_smallest("optimal:offload_cost=2", m), hi = base.activation_peak_bytes;
  EXPECT_LT(lo, off_smallest("optimal", m));  // offloading makes smaller budgets feasible
  ASSERT_GT(lo, 0u);
  int offloading = 0;
  for (int k = 0; k <= 2; ++k) {
    const Schedule s = test::plan("optimal:offload_cost=2", m, lo + (hi - lo) * static_cast<std::uint64_t>(k) / 4);
    offloading += off_bytes(g, s) > 0;
    const Trace t = test::run(m, s, 1, 0);
    EXPECT_EQ(t.activation_peak_bytes, simulate(m, s, nullptr).activation_peak_bytes) << k;
    EXPECT_EQ(t.losses(), base.losses()) << k;
    EXPECT_EQ(t.grad_checksum, base.grad_checksum) << k;
  }
  EXPECT_GT(offloading, 0);
}

TEST(PolicyOptimalOffload, RefusedWithoutABudgetAndPastItsRecords) {
  const ModelConfig m = test::tiny(Family::Llama, AttentionImpl::Flash, 2);
  try {
    test::plan("optimal:offload_cost=2", m);
    ADD_FAILURE() << "planned offloads without a budget";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("offload_cost weighs offloads"), std::string::npos) << e.what();
  }
  const BlockGraph g(m);
  EXPECT_THROW(fronts(g, test::forward_flops(g), 2.0, 100), TooManyOffloads);
  EXPECT_NO_THROW(fronts(g, test::forward_flops(g), 2.0));
}

}  // namespace
}  // namespace remat
