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
#include <functional>
#include <iterator>
#include <limits>
#include <map>
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

inline constexpr std::uint64_t kNoLimit = std::numeric_limits<std::uint64_t>::max();

// above[o] for each useful option o of `order` (sorted by cost, kept bytes, reach and index;
// among the useful ones by cost, kept bytes and index): cap minus the least peak of a useful option before o in `order` that
// keeps no more than o; kNoLimit when there is none. Prefix minima over the ranks of the kept
// bytes, in a Fenwick tree.
inline void dominated_below(const std::vector<OptionCost>& opts, const std::vector<std::size_t>& order,
                            const std::vector<bool>& useful, std::uint64_t cap, std::vector<std::uint64_t>* above) {
  above->assign(opts.size(), kNoLimit);
  std::vector<std::uint64_t> kept;
  for (std::size_t o : order)
    if (useful[o]) kept.push_back(opts[o].kept);
  std::sort(kept.begin(), kept.end());
  kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
  std::vector<std::uint64_t> least(kept.size() + 1, kNoLimit);  // 1-based Fenwick tree of peaks
  for (std::size_t o : order) {
    if (!useful[o]) continue;
    const std::size_t rank = static_cast<std::size_t>(
        std::upper_bound(kept.begin(), kept.end(), opts[o].kept) - kept.begin());  // 1-based
    std::uint64_t peak = kNoLimit;
    for (std::size_t i = rank; i > 0; i -= i & (~i + 1)) peak = std::min(peak, least[i]);
    if (peak != kNoLimit) (*above)[o] = cap - peak;  // every useful option's peak is within cap
    for (std::size_t i = rank; i < least.size(); i += i & (~i + 1)) least[i] = std::min(least[i], opts[o].peak());
  }
}

}  // namespace detail

// The cheapest choice whose peak is at most `budget`; feasible = false when none is.
// Each front is sorted by kept bytes with the cost strictly decreasing; an option shifts a
// whole front by constants, so the next front is a merge of one sorted run per option (as they
// come, O(front · log options)), each merge cut to its Pareto front: no sorting.
// `on_block`, when given, is called with each block's index before the program takes it (a
// caller's time limit throws from it).
inline Solution solve(const Chain& c, std::uint64_t budget, const std::function<void(std::size_t)>& on_block = {}) {
  using detail::State;
  Solution sol;
  if (c.floor > budget || c.base > budget) return sol;
  const std::uint64_t cap = budget - c.base;
  const std::size_t L = c.blocks.size();
  std::vector<State> front{{0, 0.0, -1, -1}};
  // The runs of one block, merged as they come: a stack of merged runs of 1, 2, 4, ... options
  // (those tried earlier below), each cut to its Pareto front; spare buffers are reused.
  std::vector<std::vector<State>> stack, spare;
  std::vector<int> height;
  std::vector<std::size_t> order;                  // a block's options, as compared below
  std::vector<bool> useful;                        // per option of a block: beaten by none
  std::vector<std::size_t> tried;                  // the useful options, in the order tried
  std::map<std::uint64_t, std::uint64_t> stairs;  // kept bytes -> least reach among those taken
  std::vector<std::uint64_t> above;                // per option: kept bytes it is beaten at or below
  auto buffer = [&] {
    std::vector<State> v;
    if (!spare.empty()) {
      v.swap(spare.back());
      spare.pop_back();
    }
    v.clear();
    return v;
  };
  // The Pareto front of a ∪ b, a's options tried before b's: sorted by kept bytes with the cost
  // strictly falling; of equal states the first (std::merge keeps a's first, as one merge of
  // every run in the order tried would).
  auto merge_into = [](const std::vector<State>& a, const std::vector<State>& b, std::vector<State>* out) {
    std::size_t i = 0, j = 0;
    while (i < a.size() || j < b.size()) {
      const State& x = (j == b.size() || (i < a.size() && !detail::before(b[j], a[i]))) ? a[i++] : b[j++];
      if (out->empty() || x.cost < out->back().cost) out->push_back(x);
    }
  };
  auto merge_top = [&] {  // the top two merged runs become one (the lower one's options first)
    std::vector<State> merged = buffer();
    merge_into(stack[stack.size() - 2], stack.back(), &merged);
    spare.push_back(std::move(stack.back()));
    stack.pop_back();
    spare.push_back(std::move(stack.back()));
    stack.back() = std::move(merged);
    height.pop_back();
    ++height.back();
  };
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
    if (on_block) on_block(b);
    const auto& opts = c.blocks[b].opt;
    // The most bytes kept after this block (after the last: any).
    const std::uint64_t room = b + 1 == L ? std::numeric_limits<std::uint64_t>::max() : cap - need[b + 1];
    // An option's own peak binds only above what the blocks after it need anyway: one that
    // keeps no more, costs no more and reaches no higher on that account makes another useless
    // here (swapping it in keeps every constraint).
    auto reach = [&](const OptionCost& oc) { return b + 1 == L ? oc.peak() : std::max(oc.peak(), oc.kept + need[b + 1]); };
    // Option x beats y when it keeps no more (the last block: any), costs no more and reaches
    // no higher, and is better in one of them or earlier. Sorted by (cost, kept, reach, index),
    // y is beaten exactly when an option before it keeps no more and reaches no higher: a
    // staircase of those taken so far (kept -> least reach, falling as kept rises) answers it.
    const bool last_block = b + 1 == L;
    order.clear();
    for (std::size_t o = 0; o < opts.size(); ++o)
      if (opts[o].allowed && opts[o].peak() <= cap) order.push_back(o);
    std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      const OptionCost &p = opts[x], &q = opts[y];
      if (p.cost != q.cost) return p.cost < q.cost;
      const std::uint64_t pk = last_block ? 0 : p.kept, qk = last_block ? 0 : q.kept;
      if (pk != qk) return pk < qk;
      if (reach(p) != reach(q)) return reach(p) < reach(q);
      return x < y;
    });
    useful.assign(opts.size(), false);
    stairs.clear();
    for (std::size_t o : order) {
      const std::uint64_t k = last_block ? 0 : opts[o].kept, r = reach(opts[o]);
      auto at = stairs.upper_bound(k);
      if (at != stairs.begin() && std::prev(at)->second <= r) continue;  // beaten
      useful[o] = true;
      auto it = stairs.insert_or_assign(k, r).first;
      for (auto next = std::next(it); next != stairs.end() && next->second >= r;) next = stairs.erase(next);
    }
    // After a state keeping K bytes, an option x that keeps no more and costs no more than y
    // (and comes first in `order` on a tie) gives a state that makes y's useless whenever x
    // fits, i.e. while K + peak(x) <= cap: y is tried only above cap minus the lowest peak of
    // such an x (a prefix minimum over kept bytes along `order`). Not for the last block, whose
    // kept bytes matter to nothing.
    if (!last_block) detail::dominated_below(opts, order, useful, cap, &above);
    stack.clear();
    height.clear();
    // The costliest options first (then by index): their states, merged at the bottom of the
    // stack, make most later states useless before they are stored, the many equal ones (the
    // same options in another order over earlier blocks) included. Of equal states the one
    // tried first stays.
    tried.clear();
    for (std::size_t o : order)
      if (useful[o]) tried.push_back(o);
    std::sort(tried.begin(), tried.end(), [&](std::size_t x, std::size_t y) {
      const OptionCost &p = opts[x], &q = opts[y];
      return p.cost != q.cost ? p.cost > q.cost : x < y;
    });
    for (std::size_t o : tried) {
      const OptionCost& oc = opts[o];
      if (oc.kept > room) continue;
      std::vector<State> run = buffer();
      // The front's costs fall along it: the states from `first` on stay within the bound.
      std::size_t first = static_cast<std::size_t>(
          std::partition_point(front.begin(), front.end(), [&](const State& x) { return x.cost + oc.cost > bound; }) -
          front.begin());
      // Sorted by kept bytes: the states at or below `above[o]` are beaten by another option.
      if (!last_block && above[o] != detail::kNoLimit)
        first = std::max(first, static_cast<std::size_t>(std::partition_point(front.begin(), front.end(),
                                                                              [&](const State& x) { return x.kept <= above[o]; }) -
                                                         front.begin()));
      std::size_t hint = detail::RestBound::kNoHint;  // kept bytes rise along the run
      // The earlier options' states merged so far (the bottom of the stack): a state keeping no
      // more at no higher cost there makes a new one useless (walked along, as kept bytes rise).
      const std::vector<State>* below = stack.empty() ? nullptr : &stack.front();
      std::size_t under = 0;  // below's states keeping no more than the new one
      // Sorted by kept bytes: the states before `end` fit (this block's peak, and the bytes the
      // blocks after it need).
      const std::uint64_t most = std::min(cap - oc.peak(), last_block ? cap : room - oc.kept);
      const std::size_t end = static_cast<std::size_t>(
          std::partition_point(front.begin(), front.end(), [&](const State& x) { return x.kept <= most; }) - front.begin());
      for (std::size_t i = first; i < end; ++i) {
        const std::uint64_t kept = front[i].kept + oc.kept;
        const double cost = front[i].cost + oc.cost;
        if (below) {
          while (under < below->size() && (*below)[under].kept <= kept) ++under;
          if (under > 0 && (*below)[under - 1].cost <= cost) {
            // That state beats every later one here too while its cost stays at or above it
            // (they keep more): skip those, galloping then halving along the falling costs.
            // (The sum as the test above forms it, so that rounding skips exactly what it would.)
            const double least = (*below)[under - 1].cost;
            auto beaten = [&](std::size_t j) { return front[j].cost + oc.cost >= least; };
            std::size_t step = 1, lo = i;  // front[lo] is beaten
            while (lo + step < end && beaten(lo + step)) lo += step, step *= 2;
            for (step /= 2; step > 0; step /= 2)
              if (lo + step < end && beaten(lo + step)) lo += step;
            i = lo;
            continue;
          }
        }
        if (b + 1 < L && bound < std::numeric_limits<double>::infinity() && cost + rest.at(b, kept, &hint) > bound) continue;
        run.push_back({kept, cost, static_cast<std::int32_t>(i), static_cast<std::int32_t>(o)});
      }
      if (run.empty()) {
        spare.push_back(std::move(run));
        continue;
      }
      stack.push_back(std::move(run));
      height.push_back(0);
      // Two merged runs of the same height become one (as a binary counter carries).
      while (stack.size() >= 2 && height[height.size() - 2] == height.back()) merge_top();
    }
    while (stack.size() >= 2) merge_top();
    front.clear();
    if (!stack.empty()) {
      front.swap(stack.back());
      spare.push_back(std::move(stack.back()));
      stack.pop_back();
      // A single run was never cut: costs strictly falling along a front can round to equal
      // ones once shifted by the option's cost.
      std::size_t w = 0;
      for (const State& x : front)
        if (w == 0 || x.cost < front[w - 1].cost) front[w++] = x;
      front.resize(w);
    }
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
