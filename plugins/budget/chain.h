// A chain: blocks run forward from the first to the last, then backward from the last to the
// first. Each block takes one of its options (the budget policy's: store everything, keep the
// selective set, keep only its input as a checkpoint; the optimal policy's: its front of
// per-tensor choices); an option fixes
//   kept      bytes the block holds from the end of its forward until its backward,
//   fwd_peak  the most bytes of this block alive during its forward (its input and output
//             included), on top of what earlier blocks keep,
//   bwd_peak  the most bytes alive during its recomputation and backward, on top of what
//             earlier blocks keep (for the last block: the head and loss included),
//   cost      the recomputation it causes.
// With P_b the bytes kept by blocks before b, the peak of a choice is
//   max(floor, base + max_b (P_b + max(fwd_peak_b, bwd_peak_b)))
// where base is held by everything outside the blocks throughout and floor is a peak outside
// the block sweep.
#pragma once
#include <algorithm>
#include <cstdint>
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

}  // namespace remat::budget
