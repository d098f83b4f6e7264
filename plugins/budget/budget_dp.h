// The budget policy's optimization over a chain (chain.h), as a pure function tests can check
// against brute force: solve() minimizes the total cost under a budget on the chain's peak
// exactly, by dynamic programming over the prefixes of the chain with a Pareto front of (kept
// bytes, cost) per prefix (after Beaumont et al. 2019, "Optimal checkpointing for heterogeneous
// chains"): every later constraint grows with the kept bytes and the cost is additive, so a
// prefix state that keeps no fewer bytes at no lower cost than another can be dropped. Costs
// must not be negative (the registry refuses negative step costs): the bounds that let the
// program skip states assume a prefix never gets cheaper.
#pragma once
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <vector>

#include "plugins/budget/chain.h"
#include "plugins/budget/chain_bounds.h"

namespace remat::budget {

namespace detail {

struct State {
  std::uint64_t kept;
  double cost;
  std::int32_t parent;  // index in the previous front
  std::int32_t option;
};

inline bool before(const State& a, const State& b) {
  return a.kept != b.kept ? a.kept < b.kept : a.cost < b.cost;
}

}  // namespace detail

// The cheapest choice whose peak is at most `budget`; feasible = false when none is.
// Each front is sorted by kept bytes with the cost strictly decreasing; an option shifts a
// whole front by constants, so the next front is a merge of one sorted run per option
// (pairwise, O(front · log options)) followed by one Pareto pass: no sorting.
inline Solution solve(const Chain& c, std::uint64_t budget) {
  using detail::State;
  Solution sol;
  if (c.floor > budget || c.base > budget) return sol;
  const std::uint64_t cap = budget - c.base;
  const std::size_t L = c.blocks.size();
  std::vector<State> front{{0, 0.0, -1, -1}}, tmp;
  std::vector<std::vector<State>> runs;
  // For backtracking: per block, the parent and option of each state of its front.
  std::vector<std::size_t> offset(L + 1, 0);
  std::vector<std::int32_t> parent, option;
  // What the blocks from b on need above the bytes kept before them, at the least: a state
  // keeping more than cap - need[b + 1] after block b cannot be completed.
  std::vector<std::uint64_t> need(L + 1, 0);
  for (std::size_t b = L; b > 0; --b) {
    std::uint64_t peak = std::numeric_limits<std::uint64_t>::max(), kept = peak;
    for (const OptionCost& oc : c.blocks[b - 1].opt)
      if (oc.allowed) peak = std::min(peak, oc.peak()), kept = std::min(kept, oc.kept);
    if (kept == std::numeric_limits<std::uint64_t>::max()) return sol;
    // What the last block keeps matters to nothing after it.
    need[b - 1] = b == L ? peak : std::max(peak, kept + need[b]);
    if (need[b - 1] > cap) return sol;
  }
  if (need[0] > cap) return sol;
  // A cost no optimal prefix exceeds: the cheapest choice that fits among those picking, per
  // block, the least cost + lambda x kept bytes, over a range of lambdas (costs are added in
  // block order, as the program adds them, so a prefix of an optimal choice never exceeds it).
  // Rounding aside: the bounds add the same costs in other orders.
  const double bound = detail::greedy_bound(c, budget) * (1.0 + 1e-9);
  const detail::RestBound rest(c, cap);
  for (std::size_t b = 0; b < L; ++b) {
    const auto& opts = c.blocks[b].opt;
    // The most bytes kept after this block (after the last: any).
    const std::uint64_t room = b + 1 == L ? std::numeric_limits<std::uint64_t>::max() : cap - need[b + 1];
    // An option's own peak binds only above what the blocks after it need anyway: one that
    // keeps no more, costs no more and reaches no higher on that account makes another useless
    // here (swapping it in keeps every constraint).
    auto reach = [&](const OptionCost& oc) { return b + 1 == L ? oc.peak() : std::max(oc.peak(), oc.kept + need[b + 1]); };
    auto beats = [&](std::size_t x, std::size_t y) {
      const OptionCost &p = opts[x], &q = opts[y];
      const bool last = b + 1 == L;  // then what it keeps does not count
      if ((!last && p.kept > q.kept) || p.cost > q.cost || reach(p) > reach(q)) return false;
      return (!last && p.kept < q.kept) || p.cost < q.cost || reach(p) < reach(q) || x < y;
    };
    runs.resize(opts.size());
    std::size_t n_runs = 0;
    for (std::size_t o = 0; o < opts.size(); ++o) {
      const OptionCost& oc = opts[o];
      if (!oc.allowed || oc.peak() > cap) continue;
      bool useless = false;
      for (std::size_t x = 0; x < opts.size() && !useless; ++x)
        useless = x != o && opts[x].allowed && opts[x].peak() <= cap && beats(x, o);
      if (useless) continue;
      auto& run = runs[n_runs];
      run.clear();
      if (oc.kept > room) continue;
      // The front's costs fall along it: the states from `first` on stay within the bound.
      const std::size_t first = static_cast<std::size_t>(
          std::partition_point(front.begin(), front.end(), [&](const State& x) { return x.cost + oc.cost > bound; }) -
          front.begin());
      for (std::size_t i = first; i < front.size(); ++i) {
        // Sorted by kept bytes: no later state fits either.
        if (front[i].kept > cap - oc.peak() || (b + 1 < L && front[i].kept > room - oc.kept)) break;
        const std::uint64_t kept = front[i].kept + oc.kept;
        const double cost = front[i].cost + oc.cost;
        if (b + 1 < L && bound < std::numeric_limits<double>::infinity() && cost + rest.at(b, kept) > bound) continue;
        run.push_back({kept, cost, static_cast<std::int32_t>(i), static_cast<std::int32_t>(o)});
      }
      if (!run.empty()) ++n_runs;
    }
    for (std::size_t width = 1; width < n_runs; width *= 2)
      for (std::size_t i = 0; i + width < n_runs; i += 2 * width) {
        tmp.clear();
        std::merge(runs[i].begin(), runs[i].end(), runs[i + width].begin(), runs[i + width].end(),
                   std::back_inserter(tmp), detail::before);
        runs[i].swap(tmp);
      }
    front.clear();
    if (n_runs > 0)
      for (const State& x : runs[0])
        if (front.empty() || x.cost < front.back().cost) front.push_back(x);
    if (front.empty()) return sol;
    offset[b + 1] = offset[b] + front.size();
    for (const State& x : front) {
      parent.push_back(x.parent);
      option.push_back(x.option);
    }
  }
  // The cheapest final state is the last one (costs decrease along the front).
  std::size_t idx = front.size() - 1;
  sol.feasible = true;
  sol.cost = front[idx].cost;
  sol.choice.assign(L, 0);
  for (std::size_t b = L; b > 0; --b) {
    const std::size_t at = offset[b - 1] + idx;
    sol.choice[b - 1] = option[at];
    idx = static_cast<std::size_t>(parent[at]);
  }
  sol.peak = chain_peak(c, sol.choice);
  return sol;
}

// The smallest budget any choice fits in, and (through `choice`) a choice that reaches it;
// the largest value when a block allows no option.
inline std::uint64_t min_budget(const Chain& c, std::vector<int>* choice = nullptr) {
  // Pareto front of (kept bytes, running peak above base) per prefix: the running peak of
  // every extension grows with both, so a state no better in either can be dropped.
  struct S {
    std::uint64_t kept, peak;
    std::int32_t parent, option;
  };
  std::vector<std::vector<S>> fronts(c.blocks.size() + 1);
  fronts[0].push_back({0, 0, -1, -1});
  for (std::size_t b = 0; b < c.blocks.size(); ++b) {
    auto& next = fronts[b + 1];
    const auto& prev = fronts[b];
    for (std::size_t o = 0; o < c.blocks[b].opt.size(); ++o) {
      const OptionCost& oc = c.blocks[b].opt[o];
      if (!oc.allowed) continue;
      for (std::size_t i = 0; i < prev.size(); ++i)
        next.push_back({prev[i].kept + oc.kept, std::max(prev[i].peak, prev[i].kept + oc.peak()),
                        static_cast<std::int32_t>(i), static_cast<std::int32_t>(o)});
    }
    std::sort(next.begin(), next.end(), [](const S& x, const S& y) {
      return x.kept != y.kept ? x.kept < y.kept : x.peak < y.peak;
    });
    std::size_t n = 0;
    for (const S& s : next)
      if (n == 0 || s.peak < next[n - 1].peak) next[n++] = s;
    next.resize(n);
    if (next.empty()) return std::numeric_limits<std::uint64_t>::max();  // no option allowed
  }
  const auto& last = fronts.back();
  std::size_t best = 0;
  for (std::size_t i = 1; i < last.size(); ++i)
    if (last[i].peak < last[best].peak) best = i;
  if (choice) {
    choice->assign(c.blocks.size(), 0);
    std::size_t idx = best;
    for (std::size_t b = c.blocks.size(); b > 0; --b) {
      (*choice)[b - 1] = fronts[b][idx].option;
      idx = static_cast<std::size_t>(fronts[b][idx].parent);
    }
  }
  return std::max(c.floor, c.base + last[best].peak);
}

}  // namespace remat::budget
