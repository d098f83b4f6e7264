// The budget policy's optimization, as a pure function over an abstract chain so tests can
// check it against brute force.
//
// A chain is a sequence of blocks run forward from the first to the last, then backward from
// the last to the first. Each block takes one of a few options (store everything, keep the
// selective set, keep only its input as a checkpoint); an option fixes
//   kept      bytes the block holds from the end of its forward until its backward,
//   fwd_peak  the most bytes of this block alive during its forward (its input and output
//             included), on top of what earlier blocks keep,
//   bwd_peak  the most bytes alive during its recomputation and backward, on top of what
//             earlier blocks keep (for the last block: the head and loss included),
//   cost      the recomputation it causes.
// With P_b the bytes kept by blocks before b, the peak of a choice is
//   max(floor, base + max_b (P_b + max(fwd_peak_b, bwd_peak_b)))
// where base is held by everything outside the blocks throughout and floor is a peak outside
// the block sweep. solve() minimizes the total cost under a budget on that peak exactly, by
// dynamic programming over the prefixes of the chain with a Pareto front of (kept bytes, cost)
// per prefix (after Beaumont et al. 2019, "Optimal checkpointing for heterogeneous chains"):
// every later constraint grows with the kept bytes and the cost is additive, so a prefix state
// that keeps no fewer bytes at no lower cost than another can be dropped.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

namespace remat::budget {

enum Option : int { Store = 0, Selective = 1, Checkpoint = 2 };
constexpr int kOptions = 3;
inline const char* option_name(int o) {
  static const char* n[] = {"store", "selective", "checkpoint"};
  return n[o];
}

struct OptionCost {
  bool allowed = true;
  std::uint64_t kept = 0;
  std::uint64_t fwd_peak = 0;
  std::uint64_t bwd_peak = 0;
  double cost = 0.0;
  std::uint64_t peak() const { return std::max(fwd_peak, bwd_peak); }
};

// A block's options: the budget policy's three (indexed by Option), or any number (the
// optimal policy's front of per-tensor choices).
struct ChainBlock {
  std::vector<OptionCost> opt = std::vector<OptionCost>(kOptions);
};

struct Chain {
  std::vector<ChainBlock> blocks;
  std::uint64_t base = 0;
  std::uint64_t floor = 0;
};

struct Solution {
  bool feasible = false;
  std::vector<int> choice;  // an Option per block
  double cost = 0.0;
  std::uint64_t peak = 0;
};

// The peak of a choice (see above).
inline std::uint64_t chain_peak(const Chain& c, const std::vector<int>& choice) {
  std::uint64_t kept = 0, peak = 0;
  for (std::size_t b = 0; b < c.blocks.size(); ++b) {
    const OptionCost& o = c.blocks[b].opt[static_cast<std::size_t>(choice[b])];
    peak = std::max(peak, kept + o.peak());
    kept += o.kept;
  }
  return std::max(c.floor, c.base + peak);
}

inline double chain_cost(const Chain& c, const std::vector<int>& choice) {
  double cost = 0.0;
  for (std::size_t b = 0; b < c.blocks.size(); ++b)
    cost += c.blocks[b].opt[static_cast<std::size_t>(choice[b])].cost;
  return cost;
}

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
  for (std::size_t b = 0; b < L; ++b) {
    const auto& opts = c.blocks[b].opt;
    runs.resize(opts.size());
    std::size_t n_runs = 0;
    for (std::size_t o = 0; o < opts.size(); ++o) {
      const OptionCost& oc = opts[o];
      if (!oc.allowed || oc.peak() > cap) continue;
      auto& run = runs[n_runs];
      run.clear();
      for (std::size_t i = 0; i < front.size(); ++i) {
        if (front[i].kept > cap - oc.peak()) break;  // sorted by kept bytes
        run.push_back({front[i].kept + oc.kept, front[i].cost + oc.cost, static_cast<std::int32_t>(i),
                       static_cast<std::int32_t>(o)});
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
