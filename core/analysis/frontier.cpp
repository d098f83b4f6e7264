#include "core/analysis/frontier.h"

#include <algorithm>
#include <atomic>
#include <exception>
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

// The smallest budget `choice` plans to: the one its refusal of a one-byte budget names (the
// budget policy says "the smallest feasible budget is N bytes"), checked (it plans at N and not
// at N - 1), else found by bisection between 1 and `high`, at which it must then plan (its own
// error otherwise).
std::uint64_t smallest_budget(const PolicyRegistry& reg, const PolicyChoice& choice, const BlockGraph& g,
                              std::uint64_t high) {
  auto plans = [&](std::uint64_t b) {
    try {
      reg.plan(choice, g, b);
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  try {
    reg.plan(choice, g, 1);
    return 1;
  } catch (const Error& e) {
    static const std::regex named("smallest feasible budget is ([0-9]+) bytes");
    std::cmatch got;
    const std::string what = e.what();
    if (std::regex_search(what.c_str(), got, named) && got[1].length() <= 19) {
      const std::uint64_t b = std::stoull(got[1].str());
      if (b > 1 && b <= high && plans(b) && !plans(b - 1)) return b;
    }
  }
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
  std::uint64_t activation_peak = 0, recompute_flops = 0, peak = 0;
  std::string params;
};

Walked walk_plan(const PolicyRegistry& reg, const PolicyChoice& choice, const BlockGraph& g,
                 std::optional<std::uint64_t> budget) {
  const Schedule s = reg.plan(choice, g, budget);
  const Prediction p = simulate(g, s, nullptr);
  return {p.activation_peak_bytes, p.flops.recompute, p.peak_bytes, s.params};
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
  f.smallest_budget = smallest_budget(reg, choice, g, f.store_all_budget);

  const std::uint64_t lo = f.smallest_budget, hi = f.store_all_budget;
  const int n = static_cast<int>(std::min<std::uint64_t>(static_cast<std::uint64_t>(points), hi - lo + 1));
  // The others: every policy that plans without a budget, those that take one (but this one)
  // when they plan without it too (optimal's minimum cut; budget refuses).
  std::vector<std::string> others, optional;
  for (const LoadedPolicy& p : reg.policies()) {
    if (!with_others || p.name == choice.name) continue;
    others.push_back(p.name);
    if (p.takes_memory_budget) optional.push_back(p.name);
    if (p.name == "selective") others.push_back("selective:modules=core_attn+mlp");
  }
  const int total = n + static_cast<int>(others.size());
  int done = 0;
  auto budget_at = [&](int i) {
    const unsigned __int128 step = static_cast<unsigned __int128>(hi - lo) * static_cast<unsigned>(i);
    return n == 1 ? lo : lo + static_cast<std::uint64_t>(step / static_cast<unsigned>(n - 1));
  };
  // The budgets are planned side by side (each plan is a child process; one thread per core, at
  // most 8), then read in order.
  struct Planned {
    std::optional<Walked> walked;
    std::exception_ptr error;  // an Error (or one derived from it)
  };
  std::vector<Planned> planned(static_cast<std::size_t>(n));
  {
    std::atomic<int> next{0};
    std::mutex mu;
    std::exception_ptr other;
    auto work = [&] {
      for (int i; (i = next++) < n;) {
        Planned& p = planned[static_cast<std::size_t>(i)];
        try {
          p.walked = walk_plan(reg, choice, g, budget_at(i));
        } catch (const Error&) {
          p.error = std::current_exception();
        } catch (...) {
          const std::lock_guard<std::mutex> hold(mu);
          if (!other) other = std::current_exception();
        }
        const std::lock_guard<std::mutex> hold(mu);
        if (progress) progress(++done, total);
      }
    };
    const int threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, std::min(8, n));
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) {
      try {
        pool.emplace_back(work);
      } catch (const std::system_error&) {
        break;  // fewer threads then
      }
    }
    work();
    for (std::thread& t : pool) t.join();
    if (other) std::rethrow_exception(other);
  }
  for (int i = 0; i < n; ++i) {
    FrontierPoint pt;
    pt.budget = budget_at(i);
    // A plan that fails here, or comes out over the budget, fits nowhere below it either: the
    // point below stands (none below: the line has no start).
    const Planned& p = planned[static_cast<std::size_t>(i)];
    bool fits = true;
    if (p.walked) {
      pt.activation_peak = p.walked->activation_peak;
      pt.recompute_flops = p.walked->recompute_flops;
      pt.peak = p.walked->peak;
      pt.params = p.walked->params;
      fits = pt.activation_peak <= pt.budget;
    } else {
      if (f.line.empty()) std::rethrow_exception(p.error);
      fits = false;
    }
    if (!fits && f.line.empty())
      throw Error("'" + policy + "' planned " + std::to_string(pt.activation_peak) + " activation bytes for a budget of " +
                  std::to_string(pt.budget));
    if (!f.line.empty() && (!fits || f.line.back().recompute_flops < pt.recompute_flops)) {
      const FrontierPoint& prev = f.line.back();
      pt.activation_peak = prev.activation_peak;
      pt.recompute_flops = prev.recompute_flops;
      pt.peak = prev.peak;
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
