// `optimal`: per block, which saved tensors to keep and how to rebuild the others (inside the
// backward after a forward or a checkpoint and a recompute, or all before the backward), chosen
// for the whole step: with --memory-budget the least recompute cost whose activation peak fits
// (every choice of every block table walked, optimal_options.h, and its fronts, fronts.h; the chain program of
// budget_dp.h over each table's front); without one the fewest bytes a block keeps when no
// weight GEMM runs again (a minimum cut, min_cut.h).
#include <optional>
#include <string>
#include <vector>

#include "core/plugin/policy.h"
#include "core/util/error.h"
#include "plugins/budget/budget_chain.h"
#include "plugins/budget/budget_dp.h"
#include "plugins/optimal/fronts.h"
#include "plugins/optimal/min_cut.h"
#include "plugins/optimal/optimal_options.h"

namespace {

using remat::optimal::Choice;
using remat::optimal::schedule_of;

class OptimalPolicy final : public remat::Policy {
 public:
  std::string name() const override { return "optimal"; }
  std::string description() const override {
    return "per block, which saved tensors to keep and how to rebuild the others (inside the backward or "
           "before it): the least recompute within --memory-budget (exact over every choice), or without one "
           "the minimum cut (fewest bytes, no weight GEMM recomputed)";
  }
  bool takes_memory_budget() const override { return true; }
  std::vector<remat::ParamDecl> params() const override { return {}; }

  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    using namespace remat;
    const BlockGraph& model = *ctx.graph;
    // A class of blocks: one table, with the model's window or without (their FLOPs differ).
    auto class_of = [&](int b) { return OptimalPolicy::class_of(model, b); };
    const bool flops = ctx.cost_unit == "flops";
    std::vector<Choice> pick;
    Schedule s;
    if (!ctx.memory_budget) {
      // The cut is the table's; its cost the block's class's.
      std::vector<std::optional<budget::Mask>> cut(static_cast<std::size_t>(model.table_count()));
      std::vector<std::optional<Choice>> per_class(2 * static_cast<std::size_t>(model.table_count()));
      for (int b = 0; b < ctx.blocks; ++b) {
        auto& c = per_class[class_of(b)];
        const int t = model.table_index(b);
        auto& keep = cut[static_cast<std::size_t>(t)];
        if (!keep) keep = optimal::min_cut(model.table(t)).keep;
        if (!c)
          c = optimal::evaluate(model.table(t), budget::step_costs(model, t, model.windowed(b), ctx.step_cost, flops),
                                optimal::Mode::Inside, *keep);
        pick.push_back(*c);
      }
      s = schedule_of(model, pick);
      s.params = "min-cut";
      return s;
    }
    return plan_to(ctx, with_budget(ctx), *ctx.memory_budget);
  }

  // The budgets share every table's choices and the chain: walked once, solved per budget.
  std::vector<remat::BudgetedPlan> plan_budgets(const remat::PlanContext& ctx,
                                                const std::vector<std::uint64_t>& budgets) const override {
    std::vector<remat::BudgetedPlan> out(budgets.size());
    std::optional<Fronts> f;
    std::string error;
    try {
      f = with_budget(ctx);
    } catch (const remat::Error& e) {
      error = e.what();
    }
    for (std::size_t i = 0; i < budgets.size(); ++i) {
      if (!f) {
        out[i].error = error;
        continue;
      }
      try {
        out[i].schedule = plan_to(ctx, *f, budgets[i]);
      } catch (const remat::Error& e) {
        out[i].error = e.what();
      }
    }
    return out;
  }

 private:
  // Per class of blocks, its front as a middle and as the last block, and the chain over them.
  struct Fronts {
    std::vector<std::vector<Choice>> mid, last;
    remat::budget::Chain chain;
  };

  static std::size_t class_of(const remat::BlockGraph& model, int b) {
    return static_cast<std::size_t>(2 * model.table_index(b) + (model.windowed(b) ? 1 : 0));
  }

  Fronts with_budget(const remat::PlanContext& ctx) const {
    using namespace remat;
    const BlockGraph& model = *ctx.graph;
    const bool flops = ctx.cost_unit == "flops";
    Fronts f;
    f.mid.resize(2 * static_cast<std::size_t>(model.table_count()));
    f.last = f.mid;
    for (int b = 0; b < ctx.blocks; ++b) {
      const std::size_t k = class_of(model, b);
      if (!f.mid[k].empty()) continue;
      const int t = model.table_index(b);
      optimal::Fronts both =
          optimal::fronts(model.table(t), budget::step_costs(model, t, model.windowed(b), ctx.step_cost, flops));
      f.mid[k] = std::move(both.mid);
      f.last[k] = std::move(both.last);
    }
    f.chain = budget::outer_chain(model);
    for (int b = 0; b < ctx.blocks; ++b) {
      const auto& fr = (b + 1 == ctx.blocks ? f.last : f.mid)[class_of(model, b)];
      budget::ChainBlock blk;
      blk.opt.clear();
      for (const Choice& c : fr) blk.opt.push_back(b + 1 == ctx.blocks ? c.last : c.mid);
      f.chain.blocks.push_back(std::move(blk));
    }
    return f;
  }

  remat::Schedule plan_to(const remat::PlanContext& ctx, const Fronts& f, std::uint64_t budget) const {
    using namespace remat;
    const BlockGraph& model = *ctx.graph;
    budget::Solution sol = budget::solve(f.chain, budget);
    if (!sol.feasible)
      throw Error("a memory budget of " + std::to_string(budget) +
                  " bytes is too small for this model: the smallest feasible budget is " +
                  std::to_string(budget::min_budget(f.chain)) + " bytes");
    std::vector<Choice> pick;
    for (int b = 0; b < ctx.blocks; ++b) {
      const auto& fr = (b + 1 == ctx.blocks ? f.last : f.mid)[class_of(model, b)];
      pick.push_back(fr[static_cast<std::size_t>(sol.choice[static_cast<std::size_t>(b)])]);
    }
    Schedule s = schedule_of(model, pick);
    s.params = "budget=" + std::to_string(budget);
    if (ctx.activation_peak) {
      const std::uint64_t actual = ctx.activation_peak(s);
      if (actual > budget)
        throw Error("internal: the chosen schedule peaks at " + std::to_string(actual) +
                    " activation bytes in the simulator (the chain model said " + std::to_string(sol.peak) +
                    "), over the budget of " + std::to_string(budget));
    }
    return s;
  }
};

}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(OptimalPolicy)
