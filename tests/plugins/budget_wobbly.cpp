// A policy that plans to a memory budget, badly on purpose: refused below the activation peak of
// checkpointing every block (naming it as the smallest feasible budget), and from it in 4 KiB
// bands in turn: checkpoint every block, store everything (over most budgets), fail, checkpoint
// every second block; from the fifth band on, failing is crashing (SIGSEGV, which takes down the
// whole batch of budgets planned with it). Its frontier must still never rise and stay within
// each budget.
#include <csignal>
#include <stdexcept>
#include <string>

#include "core/plugin/policy.h"

namespace {

remat::Schedule checkpoint_every(int blocks, int every) {
  remat::Schedule s;
  s.blocks = blocks;
  for (int b = 0; b < blocks; ++b) s.forward(b, b % every == 0 ? remat::Keep::input() : remat::Keep::all());
  for (int b = blocks - 1; b >= 0; --b) {
    if (b % every == 0) s.recompute(b, remat::Keep::all());
    s.backward(b);
  }
  return s;
}

class BudgetWobbly final : public remat::Policy {
 public:
  std::string name() const override { return "budget_wobbly"; }
  std::string description() const override { return "plans to a budget, non-monotonically"; }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  bool takes_memory_budget() const override { return true; }
  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    const std::uint64_t budget = ctx.memory_budget.value_or(0);
    const remat::Schedule all = checkpoint_every(ctx.blocks, 1);
    if (!ctx.activation_peak) throw std::runtime_error("no simulator to size the plans with");
    const std::uint64_t least = ctx.activation_peak(all);
    if (budget < least)
      throw std::runtime_error("the smallest feasible budget is " + std::to_string(least) + " bytes");
    switch (((budget - least) / 4096) % 4) {
      case 0: return all;
      case 1: return remat::store_all_schedule(ctx.blocks);
      case 2:
        if ((budget - least) / 4096 >= 4) std::raise(SIGSEGV);
        throw std::runtime_error("no plan in this band");
      default: return checkpoint_every(ctx.blocks, 2);
    }
  }
};

}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(BudgetWobbly)
