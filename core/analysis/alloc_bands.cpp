#include "core/analysis/alloc_bands.h"

#include <algorithm>
#include <array>

namespace remat {

AllocBands::AllocBands(const Trace& t) : range_(timeline_range(t)), names_(t.names) {
  const std::size_t end = std::min(range_.end, t.events.size());
  event_band_.assign(end, npos);
  event_t_.resize(end);
  std::int64_t last = range_.start_ns;
  for (std::size_t i = 0; i < end; ++i) {
    // Events before the range count at its start; a time going back counts as the one before.
    const std::int64_t ti = i < range_.first ? range_.start_ns : std::clamp(t.events[i].t_ns, range_.start_ns, range_.end_ns);
    last = std::max(last, ti);
    event_t_[i] = last;
  }
  for (const Allocation& a : allocations(t)) {
    if (a.alloc_event >= end) continue;                             // allocated after the range
    if (a.free_event < range_.first) continue;                      // freed before it
    AllocBand b;
    b.a = a;
    b.alloc_ns = t.events[a.alloc_event].t_ns;
    b.free_ns = a.free_event < t.events.size() ? t.events[a.free_event].t_ns : -1;
    b.t0 = event_t_[a.alloc_event];
    b.t1 = a.free_event < end ? event_t_[a.free_event] : range_.end_ns;
    const auto k = static_cast<std::uint32_t>(bands_.size());
    event_band_[a.alloc_event] = k;
    if (a.free_event < end) event_band_[a.free_event] = k;
    bands_.push_back(b);
  }
  sizes_.reserve(bands_.size());
  for (const AllocBand& b : bands_) sizes_.push_back(b.a.bytes);
  std::sort(sizes_.begin(), sizes_.end());
}

const std::string& AllocBands::tensorName(const AllocBand& b) const {
  static const std::string empty;
  return b.a.tensor < names_.size() ? names_[b.a.tensor] : empty;
}

namespace {

bool stacked(const AllocBand& b, const CategorySet& shown) {
  return shown[static_cast<int>(b.a.category)] && b.a.category != Category::HostOffloaded && b.t1 > b.t0;
}

struct Rec {
  std::uint32_t rank;
  BandPoint p;
};

}  // namespace

AllocLayout layout_bands(const AllocBands& bands, const CategorySet& shown, std::uint64_t min_bytes) {
  AllocLayout L;
  L.shown = shown;
  L.min_bytes = min_bytes;
  L.origin = bands.range().start_ns;
  const auto& all = bands.bands();
  std::vector<std::uint32_t> rank(all.size(), AllocBands::npos);
  std::array<bool, kNumCategories> small_used{};
  for (std::size_t k = 0; k < all.size(); ++k) {
    if (!stacked(all[k], shown)) continue;
    if (all[k].a.bytes >= min_bytes) {
      rank[k] = static_cast<std::uint32_t>(L.big.size());
      L.big.push_back(static_cast<std::uint32_t>(k));
    } else {
      small_used[static_cast<int>(all[k].a.category)] = true;
    }
  }
  std::array<int, kNumCategories> small_slot{};
  for (int c = 0; c < kNumCategories; ++c)
    if (small_used[c]) {
      small_slot[c] = static_cast<int>(L.small_categories.size());
      L.small_categories.push_back(static_cast<Category>(c));
    }
  L.small_top.resize(L.small_categories.size());

  std::vector<double> bottom(L.big.size());  // current bottom per rank
  std::vector<std::uint32_t> live;           // ranks alive, increasing (a new one is the highest)
  std::vector<Rec> recs;
  recs.reserve(L.big.size() * 2);
  std::vector<double> small(L.small_categories.size());
  double big_total = 0;
  auto push_step = [&](std::int64_t t) {
    const double x = static_cast<double>(t - L.origin);
    if (L.step_x.empty() || L.step_x.back() != x) {
      L.step_x.push_back(x);
      L.big_top.push_back(0);
      for (auto& s : L.small_top) s.push_back(0);
    }
    L.big_top.back() = big_total;
    double cum = big_total;
    for (std::size_t j = 0; j < small.size(); ++j) L.small_top[j].back() = cum += small[j];
  };
  L.step_x.reserve(bands.events() + 1);
  L.big_top.reserve(bands.events() + 1);
  for (auto& st : L.small_top) st.reserve(bands.events() + 1);
  push_step(L.origin);  // empty until the first allocation
  for (std::size_t i = 0; i < bands.events(); ++i) {
    const std::uint32_t k = bands.bandOfEvent(i);
    if (k == AllocBands::npos || !stacked(all[k], shown)) continue;
    const AllocBand& b = all[k];
    const bool alloc = i == b.a.alloc_event;
    const std::int64_t t = bands.eventTime(i);
    const double bytes = static_cast<double>(b.a.bytes);
    if (const std::uint32_t r = rank[k]; r != AllocBands::npos) {
      if (alloc) {
        bottom[r] = big_total;
        big_total += bytes;
        live.push_back(r);
        recs.push_back({r, {t, bottom[r]}});
      } else {
        auto pos = std::lower_bound(live.begin(), live.end(), r);
        for (auto it = pos + 1; it != live.end(); ++it) {
          bottom[*it] -= bytes;
          recs.push_back({*it, {t, bottom[*it]}});
        }
        live.erase(pos);
        big_total -= bytes;
      }
    } else {
      small[static_cast<std::size_t>(small_slot[static_cast<int>(b.a.category)])] += alloc ? bytes : -bytes;
    }
    push_step(t);
  }

  // Breakpoints grouped per band, in time order; of several at one time the last holds.
  L.offsets.assign(L.big.size() + 1, 0);
  for (const Rec& r : recs) ++L.offsets[r.rank + 1];
  for (std::size_t k = 0; k < L.big.size(); ++k) L.offsets[k + 1] += L.offsets[k];
  std::vector<BandPoint> grouped(recs.size());
  std::vector<std::size_t> fill(L.offsets.begin(), L.offsets.end() - 1);
  for (const Rec& r : recs) grouped[fill[r.rank]++] = r.p;
  L.points.reserve(grouped.size());
  std::size_t out = 0;
  for (std::size_t k = 0; k < L.big.size(); ++k) {
    const std::size_t start = out;
    for (std::size_t j = L.offsets[k]; j < L.offsets[k + 1]; ++j) {
      if (out > start && L.points.back().t == grouped[j].t) L.points.back() = grouped[j];
      else {
        L.points.push_back(grouped[j]);
        ++out;
      }
    }
    L.offsets[k] = start;
  }
  L.offsets.back() = out;
  L.extents.resize(L.big.size());
  for (std::size_t k = 0; k < L.big.size(); ++k) {
    const AllocBand& b = all[L.big[k]];
    L.extents[k] = {b.t0, b.t1, static_cast<double>(b.a.bytes), L.points[L.offsets[k]].y, L.points[L.offsets[k + 1] - 1].y};
  }
  L.blocks.resize((L.big.size() + AllocLayout::kBlock - 1) / AllocLayout::kBlock);
  for (std::size_t k = 0; k < L.big.size(); ++k) {
    const BandExtent& e = L.extents[k];
    AllocLayout::Block& blk = L.blocks[k / AllocLayout::kBlock];
    if (k % AllocLayout::kBlock == 0) blk = {e.t1, e.lowest, e.highest + e.bytes};
    blk.t1 = std::max(blk.t1, e.t1);
    blk.lowest = std::min(blk.lowest, e.lowest);
    blk.highest = std::max(blk.highest, e.highest + e.bytes);
  }
  return L;
}

double AllocLayout::bottom(std::size_t k, std::int64_t t) const {
  auto b = points.begin() + static_cast<std::ptrdiff_t>(offsets[k]);
  auto e = points.begin() + static_cast<std::ptrdiff_t>(offsets[k + 1]);
  auto it = std::upper_bound(b, e, t, [](std::int64_t v, const BandPoint& p) { return v < p.t; });
  return it == b ? b->y : std::prev(it)->y;
}

std::size_t AllocLayout::stepAt(std::int64_t t) const {
  const double x = static_cast<double>(t - origin);
  auto it = std::upper_bound(step_x.begin(), step_x.end(), x);
  return it == step_x.begin() ? npos : static_cast<std::size_t>(it - step_x.begin()) - 1;
}

double AllocLayout::top(std::int64_t t) const {
  const std::size_t s = stepAt(t);
  if (s == npos) return 0;
  return small_top.empty() ? big_top[s] : small_top.back()[s];
}

BandHit AllocLayout::at(const AllocBands& bands, std::int64_t t, double bytes, std::int64_t slack) const {
  BandHit hit;
  const auto& all = bands.bands();
  std::int64_t best = slack + 1;  // distance in time of the best hit so far
  for (std::size_t k = 0; k < big.size(); ++k) {
    const BandExtent& e = extents[k];
    if (e.t0 > t + slack) break;  // and every later one
    if (e.t1 <= t - slack || bytes < e.lowest || bytes >= e.highest + e.bytes) continue;
    const AllocBand& b = all[big[k]];
    const std::int64_t at = std::clamp(t, b.t0, b.t1 - 1);
    const std::int64_t d = at > t ? at - t : t - at;
    if (d >= best) continue;
    const double y = bottom(k, at);
    if (bytes < y || bytes >= y + static_cast<double>(b.a.bytes)) continue;
    hit = {BandHit::Band, big[k], b.a.category, y, y + static_cast<double>(b.a.bytes)};
    best = d;
    if (d == 0) return hit;
  }
  if (hit.kind != BandHit::None) return hit;
  const std::size_t s = stepAt(t);
  if (s == npos) return hit;
  double lo = big_top[s];
  for (std::size_t j = 0; j < small_categories.size(); ++j) {
    const double hi = small_top[j][s];
    if (bytes >= lo && bytes < hi) return {BandHit::Small, 0, small_categories[j], lo, hi};
    lo = hi;
  }
  return hit;
}

}  // namespace remat
