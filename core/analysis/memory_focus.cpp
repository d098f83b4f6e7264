#include "core/analysis/memory_focus.h"

#include <algorithm>

namespace remat {

CategorySet all_categories() {
  CategorySet s;
  s.fill(true);
  return s;
}

CategorySet activations_only() {
  CategorySet s;
  for (int c = 0; c < kNumCategories; ++c) s[c] = !is_static(static_cast<Category>(c));
  return s;
}

bool shows_all(const CategorySet& shown) {
  return std::all_of(shown.begin(), shown.end(), [](bool b) { return b; });
}

StackPeak stacked_peak(const MemoryTimeline& tl, const CategorySet& shown) {
  StackPeak best;
  for (std::size_t i = 0; i < tl.points.size(); ++i) {
    std::int64_t s = 0;
    for (int c = 0; c < kNumCategories; ++c)
      if (shown[c] && static_cast<Category>(c) != Category::HostOffloaded) s += tl.points[i].live[c];
    if (i == 0 || s > best.bytes) best = {s, i};
  }
  return best;
}

double fitted_value_top(const MemoryTimeline& tl, const CategorySet& shown) {
  double top = static_cast<double>(stacked_peak(tl, shown).bytes);
  if (shown[static_cast<int>(Category::HostOffloaded)])
    for (const TimelinePoint& p : tl.points) top = std::max(top, static_cast<double>(p.host));
  return top > 0 ? top * kValueHeadroom : 1024.0;
}

std::vector<const Allocation*> largest_shown(const LiveTensorIndex& live, std::size_t event, std::size_t n,
                                             const CategorySet& shown) {
  return live.largest_at(event, n, [&shown](const Allocation& a) { return shown[static_cast<int>(a.category)]; });
}

}  // namespace remat
