// A table's two fronts (as a middle block and as the last one) exactly as front() finds them in
// all_choices(), without holding every choice: each is kept as the figures that decide (56
// bytes instead of a Choice), the records are sorted cheapest first (ties as front()'s stable
// sort leaves them: in the walk's order) and swept once. The middle block's sweep keeps a
// staircase of the kept bytes and peaks of the choices taken so far (a choice is beaten when
// one of them keeps no more bytes and reaches no higher, as covers() says, at no more cost);
// the last block's the least peak so far. The choices on a front are then walked in full
// (evaluate(), whose figures are the records', tests check). With an offload cost per byte, the
// middle block's records also hold every offload of every choice (offload_sets.h: per kept set
// its distinct offloaded bytes); the last block offloads nothing (it would only cost more).
#pragma once
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plugins/optimal/offload_sets.h"
#include "plugins/optimal/optimal_options.h"

namespace remat::optimal {

struct Fronts {
  std::vector<Choice> mid, last;
};

// Records of offloads past this many for one table are refused (each is 56 bytes).
inline constexpr std::size_t kMaxOffloadRecords = std::size_t{1} << 23;

// Thrown when a table's offloads would need more than kMaxOffloadRecords records.
struct TooManyOffloads : Error {
  using Error::Error;
};

inline Fronts fronts(const BlockGraph& g, const std::vector<double>& cost, std::optional<double> offload_cost = {},
                     std::size_t max_offload_records = kMaxOffloadRecords) {
  struct Rec {
    double cost;
    std::uint64_t kept, peak_mid, peak_last, order;
    Mask keep, off;
  };
  std::vector<Rec> recs;
  budget::require_mask_width(g, "optimal");
  const int free = __builtin_popcountll(budget::saved_mask(g)) - 1;  // the saved set less the input
  if (free <= kMaxChoiceTensors) recs.reserve(3 * (std::size_t{1} << free));  // else for_each_choice refuses
  for_each_choice(g, cost, [&](const Choice& c, std::uint64_t order) {
    recs.push_back({c.mid.cost, c.mid.kept, c.mid.peak(), c.last.peak(), order, c.keep, 0});
  });
  if (offload_cost) {
    // Every record's offloads: per kept set K, Inside's and Before's of K's subsets (the input
    // among them), a checkpoint's of its input alone (all it holds).
    const std::vector<int> free_t = free_tensors(g);
    constexpr std::size_t none = ~std::size_t{0};
    std::vector<std::size_t> at(3 * (std::size_t{1} << free_t.size()), none);
    for (std::size_t i = 0; i < recs.size(); ++i) at[recs[i].order] = i;
    const Offload input{g.tensors()[static_cast<std::size_t>(g.input())].bytes, bit(g.input())};
    // Counted first (refused before growing past the limit), then added.
    std::size_t extra = 0;
    for_each_kept_set(g, free_t, [&](std::uint64_t k, const Offloads& offs) {
      for (std::uint64_t m = 0; m < 3; ++m)
        if (at[3 * k + m] != none) extra += static_cast<Mode>(m) == Mode::Checkpoint ? 1 : offs.size() - 1;
      if (extra > max_offload_records)
        throw TooManyOffloads("its offloads give more than " + std::to_string(max_offload_records) +
                              " distinct choices (" + std::to_string(free_t.size()) + " recomputable tensors)");
    });
    recs.reserve(recs.size() + extra);
    for_each_kept_set(g, free_t, [&](std::uint64_t k, const Offloads& offs) {
      for (std::uint64_t m = 0; m < 3; ++m) {
        const std::size_t i = at[3 * k + m];
        if (i == none) continue;
        const Rec r = recs[i];
        auto add = [&](const Offload& o) {
          recs.push_back({r.cost + *offload_cost * static_cast<double>(o.bytes), r.kept - o.bytes, r.peak_mid,
                          r.peak_last, r.order, r.keep, o.tensors});
        };
        if (static_cast<Mode>(m) == Mode::Checkpoint) add(input);
        else
          for (std::size_t j = 1; j < offs.size(); ++j) add(offs[j]);
      }
    });
  }
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
    out.mid.push_back(offloaded(g, evaluate(g, cost, mode_of(r), r.keep), r.off, offload_cost.value_or(0.0)));
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
    if (r.off || (!out.last.empty() && least <= r.peak_last)) continue;
    out.last.push_back(evaluate(g, cost, mode_of(r), r.keep));
    least = r.peak_last;
  }
  return out;
}

}  // namespace remat::optimal
