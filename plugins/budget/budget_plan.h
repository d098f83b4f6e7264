// The budget policy's plan (store, the selective set or a checkpoint per block: the chain of
// budget_chain.h solved by budget_dp.h), shared by `budget` and by `optimal`'s fallback, and the
// check both policies make of a schedule against the simulator.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/plugin/policy.h"
#include "core/util/error.h"
#include "plugins/budget/budget_chain.h"
#include "plugins/budget/budget_dp.h"

namespace remat::budget {

// `s` once the simulator's activation peak is within the budget; an internal error otherwise
// (the chain model, which said `model_peak`, and the simulator disagree).
inline Schedule checked(const PlanContext& ctx, Schedule s, std::uint64_t model_peak, std::uint64_t budget) {
  if (ctx.activation_peak) {
    const std::uint64_t actual = ctx.activation_peak(s);
    if (actual > budget)
      throw Error("internal: the chosen schedule peaks at " + std::to_string(actual) +
                  " activation bytes in the simulator (the chain model said " + std::to_string(model_peak) +
                  "), over the budget of " + std::to_string(budget));
  }
  return s;
}

// The cheapest per-block mix of store, the selective set `sel` and a checkpoint whose activation
// peak fits `budget`, checked with the simulator (its params left to the caller); nullopt, with
// *least the smallest feasible budget, when none fits.
inline std::optional<Schedule> plan_blocks(const PlanContext& ctx, const std::vector<std::string>& sel,
                                           std::uint64_t budget, std::uint64_t* least) {
  const BlockGraph& g = *ctx.graph;
  for (int i = 0; i < g.table_count(); ++i) require_mask_width(g.table(i), "budget");
  const ChainSpec spec = chain_from_graph(g, ctx.step_cost, ctx.blocks, sel, ctx.cost_unit == "flops");
  const Solution sol = solve(spec.chain, budget);
  if (!sol.feasible) {
    *least = min_budget(spec.chain);
    return std::nullopt;
  }
  return checked(ctx, schedule_for(g, spec, sol.choice), sol.peak, budget);
}

}  // namespace remat::budget
