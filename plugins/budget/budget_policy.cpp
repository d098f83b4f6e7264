// `budget`: the cheapest per-block choice among store-everything, the selective set and
// recompute-from-a-checkpoint whose activation peak fits --memory-budget (see budget_dp.h for
// the dynamic program and budget_chain.h for the chain it runs on).
#include <optional>
#include <string>
#include <vector>

#include "core/plugin/policy.h"
#include "core/util/error.h"
#include "plugins/budget/budget_plan.h"

namespace {

class BudgetPolicy final : public remat::Policy {
 public:
  std::string name() const override { return "budget"; }
  std::string description() const override {
    return "cheapest per-block mix of store / selective / checkpoint whose activation peak fits "
           "--memory-budget (optimal dynamic program)";
  }
  bool takes_memory_budget() const override { return true; }
  std::vector<remat::ParamDecl> params() const override {
    remat::ParamDecl d;
    d.name = "recompute";
    d.type = remat::ParamType::Names;
    d.help = "the selective option's tensors, '+'-separated (default: the selective policy's default)";
    return {d};
  }

  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    using namespace remat::budget;
    const remat::BlockGraph& g = *ctx.graph;
    if (!ctx.memory_budget)
      throw remat::Error("the budget policy needs --memory-budget (activation bytes, e.g. 512MiB)");
    const std::uint64_t budget = *ctx.memory_budget;
    std::vector<std::string> sel =
        ctx.params.has("recompute") ? ctx.params.get_names("recompute") : std::vector<std::string>{};
    if (sel.empty()) sel = g.default_selective();
    for (const auto& n : sel) {
      bool ok = false;  // a saved tensor other than the input in some table (a table drops those it has)
      for (int i = 0; i < g.table_count(); ++i) {
        const remat::BlockGraph& t = g.table(i);
        auto id = t.find(n);
        ok = ok || (id && *id != t.input() && t.tensors()[*id].saved);
      }
      if (!ok)
        throw remat::Error("'" + n + "' cannot be in the selective set: it is not a saved tensor "
                           "other than the block input");
    }
    std::uint64_t least = 0;
    std::optional<remat::Schedule> planned = plan_blocks(ctx, sel, budget, &least);
    if (!planned)
      throw remat::Error("a memory budget of " + std::to_string(budget) +
                         " bytes is too small for this model: the smallest feasible budget is " +
                         std::to_string(least) + " bytes");
    remat::Schedule s = std::move(*planned);
    s.params = "budget=" + std::to_string(budget);
    std::string list;
    for (const auto& n : sel) list += (list.empty() ? "" : "+") + n;
    if (ctx.params.has("recompute") && !ctx.params.get_names("recompute").empty())
      s.params += ",recompute=" + list;
    return s;
  }
};

}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(BudgetPolicy)
