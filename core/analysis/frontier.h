// The recompute cost of a policy that plans to a memory budget, against the budget: from the
// smallest budget it can plan to up to the activation peak of storing everything (no
// recomputation), with every other policy's point on the same axes. Each budget's point is the
// cheapest plan found at that budget or a smaller one (a plan that fits a smaller budget fits a
// larger), so the line never rises as the budget grows. A plan that offloads (host memory
// between a block's forward and backward) weighs its bytes moved against its recomputation:
// there a point gives way to a point below it only when that one recomputes and offloads no
// more (and less of one), so the recompute line may rise where offloads give way to recompute.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/model/model_config.h"
#include "core/plugin/registry.h"

namespace remat {

struct FrontierPoint {
  std::uint64_t budget = 0;           // activation bytes the policy was given
  std::uint64_t activation_peak = 0;  // of the plan kept for it (the simulator's)
  std::uint64_t recompute_flops = 0;
  std::uint64_t peak = 0;             // device, everything included
  std::uint64_t offloaded = 0;        // host bytes at the plan's host peak (0: it offloads nothing)
  std::string params;                 // the kept plan's parameters (the policy's own words)
  bool from_smaller_budget = false;   // the plan at this budget cost more than one below it
};

struct PolicyPoint {
  std::string policy;  // as asked: name[:params]
  std::string params;  // the plan's parameters, defaults included (the policy's own words)
  std::uint64_t activation_peak = 0, recompute_flops = 0, peak = 0, offloaded = 0;
  std::string error;   // why it has no point (it could not plan this model), else ""
};

struct Frontier {
  std::string policy;                   // the budget policy
  std::uint64_t smallest_budget = 0;    // the least it plans to
  std::uint64_t store_all_budget = 0;   // `none`'s activation peak: no recomputation
  std::vector<FrontierPoint> line;      // budgets rising
  std::vector<PolicyPoint> others;
};

// `points` budgets (at least 2) spread evenly from the smallest to store-all; `policy` must
// take a memory budget (Error otherwise, naming the ones that do). A budget where the policy
// fails, or plans over the budget, keeps the point below it (the first such budget is an Error).
// With `others`, every other loaded policy is planned with its defaults (and selective also
// with Megatron-LM's core_attn+mlp) as a point; one that takes a budget only where it plans
// without one too (optimal's minimum cut). The budgets are planned side by side in batches (one
// thread per core, at most 8; a batch is one child process, PolicyRegistry::plan_budgets, so a
// policy shares its work across a batch's budgets); `progress(i, n)` is called after each batch
// and each other policy's point, from those threads, one call at a time. Throws Error.
Frontier compute_frontier(const PolicyRegistry& reg, const ModelConfig& m, const std::string& policy, int points,
                          bool others = true, const std::function<void(int, int)>& progress = {});

}  // namespace remat
