// Binomial checkpointing (Griewank & Walther 2000, "Algorithm 799: revolve") over a chain of
// blocks, as a pure function so tests and benchmarks can call it without the plugin.
//
// Model. Reversing a block means running it forward keeping everything (the "taped" forward)
// and then its backward. A checkpoint is a block input kept across other work; `snapshots`
// checkpoints may be held at once, the first block's input included; the taped activations of
// the block being reversed are not a slot. To reverse blocks [i, j) from a checkpoint at i with
// s slots: if j - i = 1, tape and reverse block i; otherwise advance m blocks (forward, keeping
// only block i's input), reverse [i + m, j) with s - 1 slots (the input of i + m becomes a
// checkpoint if that range is longer than one block), then reverse [i, i + m) with s slots.
//
// With beta(s, r) = C(s + r, s) and r the smallest integer with beta(s, r) >= l, the fewest
// advances is t(l, s) = r*l - C(s + r, s + 1) (Griewank 1992), so the executor runs
// L + t(L, s) block forwards in all: every block is taped once (the last one in the first sweep)
// and advanced t(L, s) times. t(l, s) is piecewise linear in l with slope r on
// (beta(s, r-1), beta(s, r)], and the split is optimal exactly when the left part lies in
// [beta(s, r-2), beta(s, r-1)] and the right part in [beta(s-1, r-1), beta(s-1, r)]
// (Pascal's rule makes the two linear pieces add up to t(l, s)); the split below picks the
// largest such m in O(r) without any search.
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "core/schedule/schedule.h"

namespace remat::revolve {

// C(n, k) saturated at `cap` (exact below it).
inline std::uint64_t binomial(std::uint64_t n, std::uint64_t k, std::uint64_t cap = (1ull << 62)) {
  if (k > n) return 0;
  k = std::min(k, n - k);
  unsigned __int128 c = 1;
  for (std::uint64_t i = 1; i <= k; ++i) {
    c = c * (n - k + i) / i;  // exact: C(n-k+i, i)
    if (c > cap) return cap;
  }
  return static_cast<std::uint64_t>(c);
}

// r(l, s): the smallest r with C(s + r, s) >= l (l >= 1, s >= 1).
inline std::uint64_t repetitions(std::uint64_t l, std::uint64_t s) {
  std::uint64_t r = 0;
  unsigned __int128 beta = 1;  // C(s + r, s)
  while (beta < l) {
    ++r;
    beta = beta * (s + r) / r;
  }
  return r;
}

// t(l, s): the fewest advances (block forwards besides the l taped ones) that reverse l blocks
// with s checkpoint slots. s = 0 works only for l = 1.
inline std::uint64_t min_advances(std::uint64_t l, std::uint64_t s) {
  if (l <= 1) return 0;
  if (s == 0) throw std::invalid_argument("revolve: no checkpoint slot for more than one block");
  std::uint64_t r = repetitions(l, s);
  return r * l - binomial(s + r, s + 1);
}

// Where to place the next checkpoint: the number of blocks m (1 <= m < l) to advance before
// reversing the right part [m, l) with s - 1 slots and then the left part [0, m) with s.
inline std::uint64_t split(std::uint64_t l, std::uint64_t s) {
  if (l < 2 || s < 1) throw std::invalid_argument("revolve: split needs l >= 2 and s >= 1");
  // beta(s, r) for r = 0, 1, ...: keep the last three.
  unsigned __int128 b_r = 1, b_r1 = 0, b_r2 = 0;  // beta(s, r), beta(s, r-1), beta(s, r-2)
  std::uint64_t r = 0;
  while (b_r < l) {
    ++r;
    b_r2 = b_r1;
    b_r1 = b_r;
    b_r = b_r * (s + r) / r;
  }
  // beta(s-1, r-1) = beta(s, r-1) * s / (s + r - 1); beta(s-1, r) = beta(s, r) * s / (s + r).
  unsigned __int128 c_r1 = r >= 1 ? b_r1 * s / (s + r - 1) : 0;
  unsigned __int128 c_r = b_r * s / (s + r);
  // The optimal m form [lo, hi], never empty; the largest leaves the right part the fewest blocks.
  unsigned __int128 hi = std::min<unsigned __int128>(b_r1, l - c_r1);
  unsigned __int128 lo = std::max<unsigned __int128>(b_r2, c_r >= l ? 0 : l - c_r);
  if (hi < lo || hi < 1 || hi >= l) throw std::logic_error("revolve: no optimal split");
  return static_cast<std::uint64_t>(hi);
}

// Appends the actions that reverse all `blocks` blocks with `snapshots` slots to `out`
// (blocks >= 1, snapshots >= 1). The stack replaces recursion (depth can reach L).
inline void plan(int blocks, int snapshots, Schedule& out) {
  struct Range {
    int i, j, s;
  };
  // Every block is taped and reversed once and advanced t(L, s) times in all.
  const std::uint64_t L = static_cast<std::uint64_t>(blocks);
  out.actions.reserve(out.actions.size() +
                      static_cast<std::size_t>(2 * L + min_advances(L, static_cast<std::uint64_t>(snapshots))));
  std::vector<char> forwarded(static_cast<std::size_t>(blocks), 0);
  std::vector<Range> stack{{0, blocks, snapshots}};
  while (!stack.empty()) {
    Range x = stack.back();
    stack.pop_back();
    const int l = x.j - x.i;
    if (l == 1) {  // tape and reverse
      if (forwarded[static_cast<std::size_t>(x.i)]) out.recompute(x.i, Keep::all());
      else out.forward(x.i, Keep::all());
      forwarded[static_cast<std::size_t>(x.i)] = 1;
      out.backward(x.i);
      continue;
    }
    if (x.s < 1) throw std::logic_error("revolve: a range of several blocks without a slot");
    const int m = static_cast<int>(split(static_cast<std::uint64_t>(l), static_cast<std::uint64_t>(x.s)));
    for (int b = x.i; b < x.i + m; ++b) {
      out.forward(b, b == x.i ? Keep::input() : Keep::none());
      forwarded[static_cast<std::size_t>(b)] = 1;
    }
    stack.push_back({x.i, x.i + m, x.s});      // second
    stack.push_back({x.i + m, x.j, x.s - 1});  // first
  }
}

}  // namespace remat::revolve
