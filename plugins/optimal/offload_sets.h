// What a block may offload: any of the tensors it holds from its forward to its backward (the
// kept set K, the input included; after a checkpoint, the input alone) goes to host memory
// after the block's forward (`offload b [names]`) and comes back just before its recompute or
// backward (`prefetch b [names]`). On the device that changes only the bytes the block holds
// while the later blocks run: its forward and backward peaks are K's (the copy out follows the
// forward, the copy back comes before anything reads them), and the cost grows by the
// offload cost per byte moved. So of the subsets of K that move equal bytes, one stands for all:
// per kept set its distinct subset sums, each with the first subset found (the one without the
// later tensor on a tie).
#pragma once
#include <cstdint>
#include <vector>

#include "core/graph/block_graph.h"
#include "plugins/budget/budget_chain.h"

namespace remat::optimal {

struct Offload {
  std::uint64_t bytes = 0;
  budget::Mask tensors = 0;
};
using Offloads = std::vector<Offload>;  // by bytes, distinct; the first is {0, 0}

// S ∪ (S + t): both sorted by bytes; of equal bytes the one from S stays.
inline void add_offload(const Offloads& s, int t, std::uint64_t bytes, Offloads* out) {
  out->clear();
  out->reserve(2 * s.size());
  std::size_t i = 0, j = 0;
  while (i < s.size() || j < s.size()) {
    Offload o;
    if (j == s.size() || (i < s.size() && s[i].bytes <= s[j].bytes + bytes)) {
      o = s[i++];
    } else {
      o = {s[j].bytes + bytes, s[j].tensors | budget::bit(t)};
      ++j;
    }
    if (out->empty() || out->back().bytes != o.bytes) out->push_back(o);  // equal bytes: the first stays
  }
}

// Calls visit(k, offloads) for every k in [0, 2^free.size()): the kept set is the input and
// free[i] for each bit i of k; offloads, its distinct subset sums (the input's included).
template <typename Visit>
void for_each_kept_set(const BlockGraph& g, const std::vector<int>& free, Visit&& visit) {
  const std::size_t n = free.size();
  std::vector<Offloads> level(n + 1);
  const int in = g.input();
  level[n] = {{0, 0}, {g.tensors()[static_cast<std::size_t>(in)].bytes, budget::bit(in)}};
  // Depth d decides free[d - 1] (from the last down); level[d] holds the sums of what is decided.
  auto walk = [&](auto&& self, std::size_t d, std::uint64_t k) -> void {
    if (d == 0) {
      visit(k, level[0]);
      return;
    }
    const std::size_t i = d - 1;
    level[i] = level[d];
    self(self, i, k);
    const int t = free[i];
    add_offload(level[d], t, g.tensors()[static_cast<std::size_t>(t)].bytes, &level[i]);
    self(self, i, k | (std::uint64_t{1} << i));
  };
  walk(walk, n, 0);
}

}  // namespace remat::optimal
