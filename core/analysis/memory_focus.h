// What the memory timeline shows when the user narrows it to some categories: the set of shown
// categories, the y range that fits them (the stacked areas start at 0, so the range is
// [0, headroom × the highest stack of the shown categories], and the host line counts when
// host_offloaded is shown), and the largest tensors alive among the shown categories.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "core/analysis/live_tensors.h"
#include "core/analysis/memory_timeline.h"
#include "core/memory/categories.h"

namespace remat {

using CategorySet = std::array<bool, kNumCategories>;

// Categories that stay the same size over a step: the model's weights and what the optimizer
// keeps for them.
inline bool is_static(Category c) {
  return c == Category::Parameters || c == Category::Gradients || c == Category::MasterWeights ||
         c == Category::OptimizerState;
}

CategorySet all_categories();
// Every category but the static ones (is_static: parameters, gradients, master weights,
// optimizer state).
CategorySet activations_only();
bool shows_all(const CategorySet& shown);

// Room left above the highest point, for the peak's label.
constexpr double kValueHeadroom = 1.15;

struct StackPeak {
  std::int64_t bytes = 0;  // highest sum of the shown device categories over the points
  std::size_t point = 0;   // the first point that reaches it
};

// The stack of the shown categories except host_offloaded (drawn as its own line, not stacked).
StackPeak stacked_peak(const MemoryTimeline& tl, const CategorySet& shown);

// The top of the fitted value axis: headroom × the highest of the shown stack and, when
// host_offloaded is shown, the host bytes; 1024 when nothing shown holds a byte.
double fitted_value_top(const MemoryTimeline& tl, const CategorySet& shown);

// The `n` largest allocations alive right after `event` whose category is shown.
std::vector<const Allocation*> largest_shown(const LiveTensorIndex& live, std::size_t event, std::size_t n,
                                             const CategorySet& shown);

}  // namespace remat
