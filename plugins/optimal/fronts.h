// A table's two fronts (as a middle block and as the last one) exactly as front() finds them in
// all_choices(), without holding every choice: each is kept as the figures that decide (48
// bytes instead of a Choice), the records are sorted cheapest first (ties as front()'s stable
// sort leaves them: in the walk's order) and swept once. The middle block's sweep keeps a
// staircase of the kept bytes and peaks of the choices taken so far (a choice is beaten when
// one of them keeps no more bytes and reaches no higher, as covers() says, at no more cost);
// the last block's the least peak so far. The choices on a front are then walked in full
// (evaluate(), whose figures are the records', tests check).
#pragma once
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <vector>

#include "plugins/optimal/optimal_options.h"

namespace remat::optimal {

struct Fronts {
  std::vector<Choice> mid, last;
};

inline Fronts fronts(const BlockGraph& g, const std::vector<double>& cost) {
  struct Rec {
    double cost;
    std::uint64_t kept, peak_mid, peak_last, order;
    Mask keep;
  };
  std::vector<Rec> recs;
  budget::require_mask_width(g, "optimal");
  const int free = __builtin_popcountll(budget::saved_mask(g)) - 1;  // the saved set less the input
  if (free <= kMaxChoiceTensors) recs.reserve(3 * (std::size_t{1} << free));  // else for_each_choice refuses
  for_each_choice(g, cost, [&](const Choice& c, std::uint64_t order) {
    recs.push_back({c.mid.cost, c.mid.kept, c.mid.peak(), c.last.peak(), order, c.keep});
  });
  auto mode_of = [](const Rec& r) { return static_cast<Mode>(r.order % 3); };
  Fronts out;
  // The middle block's front.
  std::sort(recs.begin(), recs.end(), [](const Rec& a, const Rec& b) {
    if (a.cost != b.cost) return a.cost < b.cost;
    if (a.kept != b.kept) return a.kept < b.kept;
    if (a.peak_mid != b.peak_mid) return a.peak_mid < b.peak_mid;
    return a.order < b.order;
  });
  std::map<std::uint64_t, std::uint64_t> stairs;  // kept bytes -> least peak there; peaks fall as kept rises
  for (const Rec& r : recs) {
    auto at = stairs.upper_bound(r.kept);
    if (at != stairs.begin() && std::prev(at)->second <= r.peak_mid) continue;  // beaten
    out.mid.push_back(evaluate(g, cost, mode_of(r), r.keep));
    // Taken: the steps it now beats (keeping no fewer bytes, reaching no lower) leave.
    auto it = stairs.insert_or_assign(r.kept, r.peak_mid).first;
    auto next = std::next(it);
    while (next != stairs.end() && next->second >= r.peak_mid) next = stairs.erase(next);
  }
  // The last block's front: what it keeps counts for nothing after it.
  std::sort(recs.begin(), recs.end(), [](const Rec& a, const Rec& b) {
    if (a.cost != b.cost) return a.cost < b.cost;
    if (a.kept != b.kept) return a.kept < b.kept;
    if (a.peak_last != b.peak_last) return a.peak_last < b.peak_last;
    return a.order < b.order;
  });
  std::uint64_t least = ~std::uint64_t{0};
  for (const Rec& r : recs) {
    if (!out.last.empty() && least <= r.peak_last) continue;
    out.last.push_back(evaluate(g, cost, mode_of(r), r.keep));
    least = r.peak_last;
  }
  return out;
}

}  // namespace remat::optimal
