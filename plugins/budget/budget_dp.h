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
#include <cmath>
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

// A cost the optimum does not exceed, from choices that fit: per block the option of least
// cost + lambda x kept bytes (ties: the lower peak), for lambdas spread over the options' own
// ratios, and mixes of two of those (the fewest blocks of the one keeping less, first or last,
// that fit); infinity when none fits.
inline double greedy_bound(const Chain& c, std::uint64_t budget) {
  double lo = std::numeric_limits<double>::max(), hi = 0.0;
  for (const ChainBlock& blk : c.blocks)
    for (const OptionCost& x : blk.opt)
      for (const OptionCost& y : blk.opt)
        if (x.kept > y.kept && x.cost < y.cost) {
          const double r = (y.cost - x.cost) / static_cast<double>(x.kept - y.kept);
          lo = std::min(lo, r);
          hi = std::max(hi, r);
        }
  const std::size_t L = c.blocks.size();
  std::vector<std::vector<int>> picks;
  const int steps = 24;
  for (int k = -1; k <= steps; ++k) {
    // k = -1: lambda 0 (the cheapest options); k = steps: above every ratio (the fewest bytes).
    const double lambda = k < 0 ? 0.0 : hi <= 0.0 ? 1.0 : lo * std::pow(hi / lo * 4.0, static_cast<double>(k) / steps) / 2.0;
    std::vector<int> choice(L, -1);
    for (std::size_t b = 0; b < L; ++b) {
      double score = 0.0;
      for (std::size_t o = 0; o < c.blocks[b].opt.size(); ++o) {
        const OptionCost& x = c.blocks[b].opt[o];
        if (!x.allowed) continue;
        const double v = x.cost + lambda * static_cast<double>(x.kept);
        const int p = choice[b];
        if (p < 0 || v < score || (v == score && x.peak() < c.blocks[b].opt[static_cast<std::size_t>(p)].peak())) {
          choice[b] = static_cast<int>(o);
          score = v;
        }
      }
      if (choice[b] < 0) return std::numeric_limits<double>::infinity();
    }
    if (picks.empty() || picks.back() != choice) picks.push_back(std::move(choice));
  }
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> mix(L);
  for (std::size_t i = 0; i < picks.size(); ++i)
    for (std::size_t j = i + 1; j < picks.size(); ++j)
      for (bool first : {true, false}) {
        // picks[j] keeps less than picks[i] (a larger lambda); n of its blocks, the others from picks[i].
        auto fill = [&](std::size_t n) {
          for (std::size_t b = 0; b < L; ++b) mix[b] = (first ? b < n : b >= L - n) ? picks[j][b] : picks[i][b];
          return chain_peak(c, mix) <= budget;
        };
        std::size_t a = 0, z = L;
        if (!fill(z)) continue;
        while (a < z) {
          const std::size_t m = (a + z) / 2;
          if (fill(m)) z = m;
          else a = m + 1;
        }
        fill(z);
        best = std::min(best, chain_cost(c, mix));
      }
  for (const auto& p : picks)
    if (chain_peak(c, p) <= budget) best = std::min(best, chain_cost(c, p));
  return best;
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
    if (kept == std::numeric_limits<std::uint64_t>::max() || kept + need[b] > cap) return sol;
    need[b - 1] = std::max(peak, kept + need[b]);
  }
  if (need[0] > cap) return sol;
  // A cost no optimal prefix exceeds: the cheapest choice that fits among those picking, per
  // block, the least cost + lambda x kept bytes, over a range of lambdas (costs are added in
  // block order, as the program adds them, so a prefix of an optimal choice never exceeds it).
  const double bound = detail::greedy_bound(c, budget);
  for (std::size_t b = 0; b < L; ++b) {
    const auto& opts = c.blocks[b].opt;
    const std::uint64_t room = cap - need[b + 1];  // the most bytes kept after this block
    // An option's own peak binds only above what the blocks after it need anyway: one that
    // keeps no more, costs no more and reaches no higher on that account makes another useless
    // here (swapping it in keeps every constraint).
    auto reach = [&](const OptionCost& oc) { return std::max(oc.peak(), oc.kept + need[b + 1]); };
    auto beats = [&](std::size_t x, std::size_t y) {
      const OptionCost &p = opts[x], &q = opts[y];
      if (p.kept > q.kept || p.cost > q.cost || reach(p) > reach(q)) return false;
      return p.kept < q.kept || p.cost < q.cost || reach(p) < reach(q) || x < y;
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
        if (front[i].kept > cap - oc.peak() || front[i].kept > room - oc.kept) break;
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
