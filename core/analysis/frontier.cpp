#include "core/analysis/frontier.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>
#include <optional>
#include <regex>

#include "core/engine/simulator.h"
#include "core/graph/block_graph.h"
#include "core/util/error.h"

namespace remat {

namespace {

// The budget a refusal names as the smallest ("the smallest feasible budget is N bytes", as the
// budget and optimal policies say), if any.
std::optional<std::uint64_t> named_smallest(const std::string& what) {
  static const std::regex named("smallest feasible budget is ([0-9]+) bytes");
  std::smatch got;
  if (std::regex_search(what, got, named) && got[1].length() <= 19) return std::stoull(got[1].str());
  return std::nullopt;
}

// The smallest budget `choice` plans to, found by bisection between 1 and `high`, at which it
// must plan (its own error otherwise).
std::uint64_t bisect_smallest(const PolicyRegistry& reg, const PolicyChoice& choice, const BlockGraph& g,
                              std::uint64_t high) {
  auto plans = [&](std::uint64_t b) {
    try {
      reg.plan(choice, g, b);
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  reg.plan(choice, g, high);  // nothing to recompute: it must plan here (its error otherwise)
  std::uint64_t lo = 1, hi = high;  // lo refused, hi planned
  while (hi - lo > 1) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    (plans(mid) ? hi : lo) = mid;
  }
  return hi;
}

// A plan's figures as the simulator walks it.
struct Walked {
  std::uint64_t activation_peak = 0, recompute_flops = 0, peak = 0, offloaded = 0;
  std::string params;
};

Walked walk_plan(const PolicyRegistry& reg, const PolicyChoice& choice, const BlockGraph& g,
                 std::optional<std::uint64_t> budget) {
  const Schedule s = reg.plan(choice, g, budget);
  const Prediction p = simulate(g, s, nullptr);
  return {p.activation_peak_bytes, p.flops.recompute, p.peak_bytes, p.host_peak_bytes, s.params};
}

struct Planned {
  std::optional<Walked> walked;
  std::string error;  // why there is no plan
};

// budget_at(i) of n budgets spread evenly from lo to hi.
std::uint64_t budget_at(std::uint64_t lo, std::uint64_t hi, int n, int i) {
  const unsigned __int128 step = static_cast<unsigned __int128>(hi - lo) * static_cast<unsigned>(i);
  return n == 1 ? lo : lo + static_cast<std::uint64_t>(step / static_cast<unsigned>(n - 1));
}

// Plans `budgets` side by side: one batch per thread (one thread per core, at most 8), each
// batch one child process (PolicyRegistry::plan_budgets, so a policy shares its work across a
// batch's budgets), each plan walked by the simulator; `done(k)` after each batch of k budgets.
std::vector<Planned> plan_side_by_side(const PolicyRegistry& reg, const PolicyChoice& choice, const BlockGraph& g,
                                       const std::vector<std::uint64_t>& budgets, const std::function<void(int)>& done) {
  const int n = static_cast<int>(budgets.size());
  std::vector<Planned> out(budgets.size());
  const int threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, std::min(8, n));
  std::mutex mu;
  std::exception_ptr other;
  auto batch = [&](int t) {
    // Budgets t, t + threads, ...: every batch spans the range, so the batches take about as long.
    std::vector<std::uint64_t> mine;
    for (int i = t; i < n; i += threads) mine.push_back(budgets[static_cast<std::size_t>(i)]);
    try {
      std::vector<BudgetedPlan> plans;
      try {
        plans = reg.plan_budgets(choice, g, mine);
      } catch (const Error&) {
        // The batch failed as a whole (a crash, a time limit): each budget on its own, so that
        // one budget's failure costs no other its plan.
        plans.clear();
        for (std::uint64_t b : mine) {
          BudgetedPlan one;
          try {
            one.schedule = reg.plan(choice, g, b);
          } catch (const Error& e) {
            one.error = e.what();
          }
          plans.push_back(std::move(one));
        }
      }
      for (std::size_t k = 0; k < plans.size(); ++k) {
        Planned& p = out[static_cast<std::size_t>(t) + k * static_cast<std::size_t>(threads)];
        if (!plans[k].schedule) {
          p.error = plans[k].error;
          continue;
        }
        try {
          const Prediction pr = simulate(g, *plans[k].schedule, nullptr);
          p.walked = Walked{pr.activation_peak_bytes, pr.flops.recompute, pr.peak_bytes, pr.host_peak_bytes,
                            plans[k].schedule->params};
        } catch (const Error& e) {
          p.error = e.what();
        }
      }
    } catch (...) {
      const std::lock_guard<std::mutex> hold(mu);
      if (!other) other = std::current_exception();
    }
    done(static_cast<int>(mine.size()));
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(batch, t);
    } catch (const std::system_error&) {
      // Fewer threads: this one takes the batch itself.
      batch(t);
    }
  }
  batch(0);
  for (std::thread& t : pool) t.join();
  if (other) std::rethrow_exception(other);
  return out;
}

}  // namespace

Frontier compute_frontier(const PolicyRegistry& reg, const ModelConfig& m, const std::string& policy, int points,
                          bool with_others, const std::function<void(int, int)>& progress) {
  if (points < 2) throw Error("a frontier needs at least 2 points, got " + std::to_string(points));
  const PolicyChoice choice = parse_policy_choice(policy);
  const LoadedPolicy* lp = reg.find(choice.name);
  std::string budgeted;
  for (const LoadedPolicy& p : reg.policies())
    if (p.takes_memory_budget) budgeted += (budgeted.empty() ? "" : ", ") + p.name;
  if (!lp) throw Error("no policy '" + choice.name + "' is loaded (those that plan to a budget: " + budgeted + ")");
  if (!lp->takes_memory_budget)
    throw Error("'" + choice.name + "' does not plan to a memory budget (those that do: " +
                (budgeted.empty() ? std::string("none loaded") : budgeted) + ")");
  const BlockGraph g(m);
  Frontier f;
  f.policy = policy;
  f.store_all_budget = walk_plan(reg, parse_policy_choice("none"), g, std::nullopt).activation_peak;
  const std::uint64_t hi = f.store_all_budget;
  // The others: every policy that plans without a budget, those that take one (but this one)
  // when they plan without it too (optimal's minimum cut; budget refuses).
  std::vector<std::string> others, optional;
  for (const LoadedPolicy& p : reg.policies()) {
    if (!with_others || p.name == choice.name) continue;
    others.push_back(p.name);
    if (p.takes_memory_budget) optional.push_back(p.name);
    if (p.name == "selective") others.push_back("selective:modules=core_attn+mlp");
  }
  int done = 0, total = 0;
  std::mutex mu;

  // The smallest budget: the one the policy's refusal of one byte names, checked (it plans there
  // and not one byte below: that check is planned with the line's budgets), else by bisection.
  std::uint64_t lo = 1;
  std::optional<std::uint64_t> named;
  {
    BudgetedPlan one;
    try {
      one = reg.plan_budgets(choice, g, {1}).front();
    } catch (const Error& e) {
      one.error = e.what();
    }
    if (!one.schedule) named = named_smallest(one.error);
    if (named && (*named <= 1 || *named > hi)) named.reset();
    if (!one.schedule && !named) lo = bisect_smallest(reg, choice, g, hi);
    if (named) lo = *named;
  }
  std::vector<Planned> planned;
  int n = 0;
  std::optional<Planned> below;  // the plan one byte under the named smallest budget
  for (int attempt = 0; attempt < 2; ++attempt) {
    n = static_cast<int>(std::min<std::uint64_t>(static_cast<std::uint64_t>(points), hi - lo + 1));
    std::vector<std::uint64_t> budgets;
    for (int i = 0; i < n; ++i) budgets.push_back(budget_at(lo, hi, n, i));
    if (named) budgets.push_back(lo - 1);
    total = static_cast<int>(budgets.size() + others.size()) + done;
    planned = plan_side_by_side(reg, choice, g, budgets, [&](int k) {
      const std::lock_guard<std::mutex> hold(mu);
      done += k;
      if (progress) progress(std::min(done, total), total);
    });
    if (named) {
      below = planned.back();
      planned.pop_back();
    }
    // The named budget must plan and the one below it must not; else bisect and plan again.
    if (!named || (planned.front().walked && !below->walked)) break;
    named.reset();
    lo = bisect_smallest(reg, choice, g, hi);
  }
  f.smallest_budget = lo;
  for (int i = 0; i < n; ++i) {
    FrontierPoint pt;
    pt.budget = budget_at(lo, hi, n, i);
    // A plan that fails here, or comes out over the budget, fits nowhere below it either: the
    // point below stands (none below: the line has no start).
    const Planned& p = planned[static_cast<std::size_t>(i)];
    bool fits = true;
    if (p.walked) {
      pt.activation_peak = p.walked->activation_peak;
      pt.recompute_flops = p.walked->recompute_flops;
      pt.peak = p.walked->peak;
      pt.offloaded = p.walked->offloaded;
      pt.params = p.walked->params;
      fits = pt.activation_peak <= pt.budget;
    } else {
      if (f.line.empty()) throw Error(p.error);
      fits = false;
    }
    if (!fits && f.line.empty())
      throw Error("'" + policy + "' planned " + std::to_string(pt.activation_peak) + " activation bytes for a budget of " +
                  std::to_string(pt.budget));
    // A point below beats this one: no more recomputation nor offloads, less of one (without
    // offloads: less recomputation, which the last point has least of). The latest such stands.
    auto beats = [&pt](const FrontierPoint& q) {
      return q.recompute_flops <= pt.recompute_flops && q.offloaded <= pt.offloaded &&
             (q.recompute_flops < pt.recompute_flops || q.offloaded < pt.offloaded);
    };
    const FrontierPoint* below = f.line.empty() ? nullptr : &f.line.back();
    if (fits && below) {
      below = nullptr;
      for (auto q = f.line.rbegin(); q != f.line.rend() && !below; ++q)
        if (beats(*q)) below = &*q;
    }
    if (below) {
      const FrontierPoint prev = *below;
      pt.activation_peak = prev.activation_peak;
      pt.recompute_flops = prev.recompute_flops;
      pt.peak = prev.peak;
      pt.offloaded = prev.offloaded;
      pt.params = prev.params;
      pt.from_smaller_budget = true;
    }
    f.line.push_back(pt);
  }

  for (const std::string& o : others) {
    PolicyPoint pt;
    pt.policy = o;
    try {
      const Walked w = walk_plan(reg, parse_policy_choice(o), g, std::nullopt);
      pt.params = w.params;
      pt.activation_peak = w.activation_peak;
      pt.recompute_flops = w.recompute_flops;
      pt.peak = w.peak;
      pt.offloaded = w.offloaded;
    } catch (const Error& e) {
      pt.error = e.what();
    }
    if (!pt.error.empty() && std::find(optional.begin(), optional.end(), o) != optional.end()) {
      if (progress) progress(++done, total);
      continue;
    }
    f.others.push_back(std::move(pt));
    if (progress) progress(++done, total);
  }
  return f;
}

}  // namespace remat
