// `optimal`: per block, which saved tensors to keep and how to rebuild the others (inside the
// backward after a forward or a checkpoint and a recompute, or all before the backward), chosen
// for the whole step: with --memory-budget the least recompute cost whose activation peak fits
// (every choice of every block table walked, optimal_options.h, and its fronts, fronts.h; the chain program of
// budget_dp.h over each table's front); without one the fewest bytes a block keeps when no
// weight GEMM runs again (a minimum cut, min_cut.h). With offload_cost=C (and a budget) a block
// may also keep any tensor it holds in host memory between its forward and backward, at C per byte. With time_limit=S the program stops after
// S seconds naming the block it was at; with fallback=budget a step whose tables it cannot take
// (too many tensors, or out of time) is planned by the block-level program of `budget` instead.
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "core/plugin/policy.h"
#include "core/util/error.h"
#include "plugins/budget/budget_chain.h"
#include "plugins/budget/budget_dp.h"
#include "plugins/budget/budget_plan.h"
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
           "before it), and with offload_cost which to hold in host memory: the least recompute within "
           "--memory-budget (exact over every choice), or without one the minimum cut (fewest bytes, no weight "
           "GEMM recomputed)";
  }
  bool takes_memory_budget() const override { return true; }
  std::vector<remat::ParamDecl> params() const override {
    remat::ParamDecl limit;
    limit.name = "time_limit";
    limit.type = remat::ParamType::Float;
    limit.min = 0.0;
    limit.max = 3600.0;
    limit.help = "seconds the exact program may take with --memory-budget; past them it stops naming the block "
                 "(default: no limit of its own)";
    remat::ParamDecl fallback;
    fallback.name = "fallback";
    fallback.type = remat::ParamType::String;
    fallback.default_value = "none";
    fallback.choices = {"none", "budget"};
    fallback.help = "budget: a step the exact program cannot take (a table of too many tensors, or past "
                    "time_limit) is planned by the budget policy's block-level program instead";
    remat::ParamDecl offload;
    offload.name = "offload_cost";
    offload.type = remat::ParamType::Float;
    offload.min = 0.0;
    offload.max = 1e12;
    offload.help = "with --memory-budget, also weigh keeping any held tensor in host memory between a block's "
                   "forward and its backward, at this cost per byte offloaded (out and back) in the plan's cost "
                   "unit: FLOPs, or with --costs-from its measured unit (default: nothing is offloaded)";
    return {limit, fallback, offload};
  }

  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    using namespace remat;
    const BlockGraph& model = *ctx.graph;
    // A class of blocks: one table, with the model's window or without (their FLOPs differ).
    auto class_of = [&](int b) { return OptimalPolicy::class_of(model, b); };
    const bool flops = ctx.cost_unit == "flops";
    std::vector<Choice> pick;
    Schedule s;
    if (!ctx.memory_budget) {
      if (ctx.params.has("offload_cost"))
        throw Error("offload_cost weighs offloads against recomputation within a --memory-budget; without one "
                    "the optimal policy plans the minimum cut, which offloads nothing: give a budget or drop it");
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
    const Clock clock(ctx);
    std::optional<Fronts> f;
    try {
      f = with_budget(ctx, clock);
      return plan_to(ctx, *f, *ctx.memory_budget, clock);
    } catch (const Stopped& e) {
      return fall_back(ctx, *ctx.memory_budget, e);
    }
  }

  // The budgets share every table's choices and the chain: walked once, solved per budget.
  std::vector<remat::BudgetedPlan> plan_budgets(const remat::PlanContext& ctx,
                                                const std::vector<std::uint64_t>& budgets) const override {
    std::vector<remat::BudgetedPlan> out(budgets.size());
    const auto start = std::chrono::steady_clock::now();
    const Clock clock(ctx);
    std::optional<Fronts> f;
    std::optional<Stopped> stopped;
    std::string error;
    try {
      f = with_budget(ctx, clock);
    } catch (const Stopped& e) {
      stopped = e;
    } catch (const remat::Error& e) {
      error = e.what();
    }
    // Each budget's limit as if planned alone: the shared walk's time, then its own program.
    const auto walked = std::chrono::steady_clock::now() - start;
    for (std::size_t i = 0; i < budgets.size(); ++i) {
      try {
        if (stopped) out[i].schedule = fall_back(ctx, budgets[i], *stopped);
        else if (!f) out[i].error = error;
        else out[i].schedule = plan_to(ctx, *f, budgets[i], Clock(ctx, walked));
      } catch (const Stopped& e) {
        try {
          out[i].schedule = fall_back(ctx, budgets[i], e);
        } catch (const remat::Error& e2) {
          out[i].error = e2.what();
        }
      } catch (const remat::Error& e) {
        out[i].error = e.what();
      }
    }
    return out;
  }

 private:
  // The exact program could not take the step: a table of too many tensors, or out of time. The
  // message names the block.
  struct Stopped : remat::Error {
    using remat::Error::Error;
  };
  // time_limit's deadline, from now less what was `spent` already; check() throws Stopped naming
  // the block.
  struct Clock {
    explicit Clock(const remat::PlanContext& ctx, std::chrono::steady_clock::duration spent = {}) {
      if (ctx.params.has("time_limit")) {
        limit = ctx.params.get_float("time_limit");
        deadline = std::chrono::steady_clock::now() - spent +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(limit));
      }
    }
    void check(int block, const char* doing) const {
      if (!deadline || std::chrono::steady_clock::now() < *deadline) return;
      char s[32];
      std::snprintf(s, sizeof s, "%g", limit);
      throw Stopped("the optimal policy stopped at block " + std::to_string(block) + " (" + doing +
                    "): past its time_limit of " + s + " s");
    }
    double limit = 0.0;
    std::optional<std::chrono::steady_clock::time_point> deadline;
  };

  // The step by the budget policy's program (store, the selective set or a checkpoint per
  // block) when fallback=budget, else Stopped's message with what would plan it.
  remat::Schedule fall_back(const remat::PlanContext& ctx, std::uint64_t budget, const Stopped& why) const {
    using namespace remat;
    if (!ctx.params.has("fallback") || ctx.params.get_string("fallback") != "budget")
      throw Error(std::string(why.what()) + "; optimal:fallback=budget plans such a step with the budget policy's "
                                            "block-level program instead");
    std::uint64_t least = 0;
    std::optional<Schedule> s = budget::plan_blocks(ctx, ctx.graph->default_selective(), budget, &least);
    if (!s)
      throw Error(std::string(why.what()) + "; and the budget policy's program (fallback=budget) finds no plan within " +
                  std::to_string(budget) + " bytes (it needs at least " + std::to_string(least) + ")");
    s->params = "budget=" + std::to_string(budget) + ",fallback=budget";
    return *s;
  }

  // Per class of blocks, its front as a middle and as the last block, and the chain over them.
  struct Fronts {
    std::vector<std::vector<Choice>> mid, last;
    remat::budget::Chain chain;
  };

  static std::size_t class_of(const remat::BlockGraph& model, int b) {
    return static_cast<std::size_t>(2 * model.table_index(b) + (model.windowed(b) ? 1 : 0));
  }

  Fronts with_budget(const remat::PlanContext& ctx, const Clock& clock) const {
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
      clock.check(b, "its table's choices");
      const BlockGraph& table = model.table(t);
      const int free = static_cast<int>(optimal::free_tensors(table).size());
      if (free > optimal::kMaxChoiceTensors)
        throw Stopped("the optimal policy tries every choice of a block's recomputable tensors, and block " +
                      std::to_string(b) + " has " + std::to_string(free) + " (at most " +
                      std::to_string(optimal::kMaxChoiceTensors) + ")");
      std::optional<double> per_byte;
      if (ctx.params.has("offload_cost")) per_byte = ctx.params.get_float("offload_cost");
      optimal::Fronts both;
      try {
        both = optimal::fronts(table, budget::step_costs(model, t, model.windowed(b), ctx.step_cost, flops), per_byte);
      } catch (const optimal::TooManyOffloads& e) {
        throw Stopped("the optimal policy weighs every offload of every choice, and block " + std::to_string(b) +
                      "'s table is too large for that: " + e.what() + "; plan it without offload_cost");
      }
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

  remat::Schedule plan_to(const remat::PlanContext& ctx, const Fronts& f, std::uint64_t budget,
                          const Clock& clock) const {
    using namespace remat;
    const BlockGraph& model = *ctx.graph;
    budget::Solution sol =
        budget::solve(f.chain, budget, [&](std::size_t b) { clock.check(static_cast<int>(b), "the chain program"); });
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
    if (ctx.params.has("offload_cost")) s.params += ",offload_cost=" + ctx.params.raw().at("offload_cost");
    return budget::checked(ctx, std::move(s), sol.peak, budget);
  }
};

}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(OptimalPolicy)
