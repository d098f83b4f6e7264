// The allocations view's layout: each allocation a band stacked in allocation order. Checked on a
// hand-made trace (a free drops the bands above it, and only those) and on random traces against
// a replay of the events: at every time the bands alive lie on each other from 0 with no gap
// and no overlap, each as high as its bytes, and the whole stack is the live bytes of the shown
// categories, with or without small allocations merged and with categories hidden.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "core/analysis/alloc_bands.h"

namespace remat {
namespace {

struct Builder {
  Trace t;
  void ev(std::int64_t ns, std::int64_t delta, std::uint64_t id, Category c = Category::SavedActivations,
          std::uint32_t name = 1) {
    MemoryEvent e;
    e.t_ns = ns;
    e.delta = delta;
    e.id = id;
    e.category = c;
    e.tensor = name;
    e.space = c == Category::HostOffloaded ? Space::Host : Space::Device;
    t.events.push_back(e);
  }
};

// The band of allocation `id`.
std::size_t band_of(const AllocBands& b, std::uint64_t id) {
  for (std::size_t k = 0; k < b.bands().size(); ++k)
    if (b.bands()[k].a.id == id) return k;
  ADD_FAILURE() << "no band for allocation " << id;
  return 0;
}

// The rank among the layout's single bands of band k.
std::size_t rank_of(const AllocLayout& L, std::size_t k) {
  for (std::size_t r = 0; r < L.big.size(); ++r)
    if (L.big[r] == k) return r;
  ADD_FAILURE() << "band " << k << " is not a single band";
  return 0;
}

TEST(AllocBands, AFreeDropsTheBandsAboveItAndOnlyThose) {
  Builder b;
  b.t.names = {"", "a", "b", "c", "d"};
  b.ev(0, 100, 1, Category::Parameters, 1);
  b.ev(10, 50, 2, Category::SavedActivations, 2);
  b.ev(20, 30, 3, Category::Workspace, 3);
  b.ev(30, -50, 2);
  b.ev(40, 20, 4, Category::SavedActivations, 4);
  b.ev(50, -100, 1, Category::Parameters);
  b.ev(60, -30, 3, Category::Workspace);
  const AllocBands bands(b.t);
  ASSERT_EQ(bands.bands().size(), 4u);
  const AllocLayout L = layout_bands(bands, all_categories(), 0);
  const std::size_t A = rank_of(L, band_of(bands, 1)), C = rank_of(L, band_of(bands, 3)),
                    D = rank_of(L, band_of(bands, 4)), B = rank_of(L, band_of(bands, 2));
  EXPECT_EQ(L.bottom(B, 15), 100);
  EXPECT_EQ(L.bottom(C, 25), 150);
  EXPECT_EQ(L.bottom(C, 35), 100);  // B freed below it
  EXPECT_EQ(L.bottom(A, 35), 0);    // below B: unmoved
  EXPECT_EQ(L.bottom(D, 45), 130);  // a new one on top
  EXPECT_EQ(L.bottom(C, 55), 0);    // A freed
  EXPECT_EQ(L.bottom(D, 55), 30);
  EXPECT_EQ(L.top(25), 180);
  EXPECT_EQ(L.top(55), 50);
  EXPECT_EQ(L.top(65), 20);
  const AllocBand& c = bands.bands()[band_of(bands, 3)];
  EXPECT_EQ(c.t0, 20);
  EXPECT_EQ(c.t1, 60);
  EXPECT_EQ(bands.label(c), "c");
  // The hit test finds C where it lies and the free space above the stack empty.
  BandHit h = L.at(bands, 35, 110);
  ASSERT_EQ(h.kind, BandHit::Band);
  EXPECT_EQ(bands.bands()[h.band].a.id, 3u);
  EXPECT_EQ(h.top - h.bottom, 30);
  EXPECT_EQ(L.at(bands, 35, 200).kind, BandHit::None);
  // Hiding the parameters: everything sits 100 lower.
  CategorySet shown = all_categories();
  shown[static_cast<int>(Category::Parameters)] = false;
  const AllocLayout H = layout_bands(bands, shown, 0);
  EXPECT_EQ(H.size(), 3u);
  EXPECT_EQ(H.bottom(rank_of(H, band_of(bands, 3)), 25), 50);
  EXPECT_EQ(H.top(25), 80);
}

// A random run: allocations of several categories and sizes, freed in random order, several
// events at one time; a "step" range that starts after some events (a baseline) when stepped.
Trace random_trace(unsigned seed, bool stepped) {
  std::mt19937 rng(seed);
  Builder b;
  b.t.names = {"", "x"};
  const Category cats[] = {Category::Parameters, Category::SavedActivations, Category::Workspace,
                           Category::ActivationGrads, Category::HostOffloaded};
  std::vector<std::pair<std::uint64_t, MemoryEvent>> live;
  std::int64_t now = 0;
  std::uint64_t id = 1;
  for (int i = 0; i < 600; ++i) {
    if (rng() % 3) now += 1 + static_cast<std::int64_t>(rng() % 5);
    if (live.empty() || rng() % 100 < 55) {
      const Category c = cats[rng() % 5];
      const std::int64_t bytes = 1 + static_cast<std::int64_t>(rng() % 4 == 0 ? rng() % 100000 : rng() % 300);
      b.ev(now, bytes, id, c);
      live.push_back({id++, b.t.events.back()});
    } else {
      const std::size_t j = rng() % live.size();
      MemoryEvent e = live[j].second;
      b.ev(now, -e.delta, e.id, e.category);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(j));
    }
    if (stepped && i == 150) {
      b.t.step_first_event = b.t.events.size();
      b.t.step_start_ns = now + 1;
    }
  }
  if (stepped) {
    b.t.step_end_event = b.t.events.size() - 100;
    b.t.step_end_ns = b.t.events[b.t.step_end_event - 1].t_ns;
  }
  return b.t;
}

// At each time of the timeline (after the last point at that time), against the replayed live
// bytes of the shown stacked categories.
void check_layout(const Trace& t, const AllocBands& bands, const AllocLayout& L) {
  const MemoryTimeline tl = memory_timeline(t);
  std::map<std::int64_t, std::int64_t> live_at;  // the last point at each time
  for (const TimelinePoint& p : tl.points) {
    std::int64_t s = 0;
    for (int c = 0; c < kNumCategories; ++c)
      if (L.shown[c] && static_cast<Category>(c) != Category::HostOffloaded) s += p.live[c];
    live_at[p.t_ns] = s;
  }
  live_at.erase(tl.range.end_ns);  // a band is alive up to its end, not at it
  ASSERT_GT(live_at.size(), 50u);
  for (const auto& [time, live] : live_at) {
    std::vector<std::pair<double, std::size_t>> alive;  // (bottom, rank)
    for (std::size_t r = 0; r < L.size(); ++r) {
      const AllocBand& b = bands.bands()[L.big[r]];
      if (b.t0 <= time && time < b.t1) alive.push_back({L.bottom(r, time), r});
    }
    std::sort(alive.begin(), alive.end());
    double y = 0;
    std::size_t prev_rank = 0;
    for (std::size_t i = 0; i < alive.size(); ++i) {
      const auto [bottom, r] = alive[i];
      const AllocBand& b = bands.bands()[L.big[r]];
      ASSERT_EQ(bottom, y) << "at t=" << time << ": a gap or an overlap below band " << r;
      if (i > 0) {
        ASSERT_GT(r, prev_rank) << "at t=" << time << ": not in allocation order";
      }
      ASSERT_GE(b.a.bytes, L.min_bytes);
      ASSERT_TRUE(L.shown[static_cast<int>(b.a.category)]);
      // The band is as high as its bytes: the hit test finds it at its bottom and just under
      // its top, and not at its top.
      const double h = static_cast<double>(b.a.bytes);
      BandHit lo = L.at(bands, time, bottom), hi = L.at(bands, time, bottom + h - 0.5);
      ASSERT_EQ(lo.kind, BandHit::Band);
      ASSERT_EQ(lo.band, L.big[r]);
      ASSERT_EQ(hi.band, L.big[r]);
      ASSERT_EQ(lo.top - lo.bottom, h);
      y += h;
      prev_rank = r;
    }
    // Above the single bands: the merged small ones per category, then nothing.
    const std::size_t s = L.stepAt(time);
    ASSERT_NE(s, AllocLayout::npos);
    ASSERT_EQ(L.big_top[s], y);
    double top = y;
    for (const auto& small : L.small_top) {
      ASSERT_GE(small[s], top);
      top = small[s];
    }
    ASSERT_EQ(L.top(time), static_cast<double>(live)) << "at t=" << time;
    ASSERT_EQ(top, static_cast<double>(live));
    ASSERT_EQ(L.at(bands, time, top + 1).kind, BandHit::None);
  }
}

TEST(AllocBands, BandsTileTheLiveBytesOfTheShownCategories) {
  for (unsigned seed : {1u, 2u, 3u})
    for (bool stepped : {false, true}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + (stepped ? " stepped" : " whole run"));
      const Trace t = random_trace(seed, stepped);
      const AllocBands bands(t);
      check_layout(t, bands, layout_bands(bands, all_categories(), 0));
      check_layout(t, bands, layout_bands(bands, all_categories(), 200));  // small ones merged
      CategorySet shown = activations_only();
      shown[static_cast<int>(Category::Workspace)] = false;
      const AllocLayout act = layout_bands(bands, shown, 0);
      for (std::uint32_t k : act.big) {
        EXPECT_NE(bands.bands()[k].a.category, Category::Parameters);
        EXPECT_NE(bands.bands()[k].a.category, Category::Workspace);
      }
      check_layout(t, bands, act);
      check_layout(t, bands, layout_bands(bands, shown, 150));
    }
}

TEST(AllocBands, MergingKeepsTheLargeBandsAndPutsTheSmallOnesOnTop) {
  const Trace t = random_trace(7, false);
  const AllocBands bands(t);
  const AllocLayout all = layout_bands(bands, all_categories(), 0);
  const AllocLayout merged = layout_bands(bands, all_categories(), 1000);
  EXPECT_LT(merged.size(), all.size());
  EXPECT_GT(merged.size(), 0u);
  EXPECT_FALSE(merged.small_categories.empty());
  EXPECT_TRUE(all.small_categories.empty());
  for (std::uint32_t k : merged.big) EXPECT_GE(bands.bands()[k].a.bytes, 1000u);
  // A point in a merged band names its category.
  bool found = false;
  for (std::size_t s = 0; s < merged.step_x.size() && !found; ++s) {
    const double lo = merged.big_top[s], hi = merged.small_top[0][s];
    if (hi <= lo) continue;
    const std::int64_t time = merged.origin + static_cast<std::int64_t>(merged.step_x[s]);
    const BandHit h = merged.at(bands, time, (lo + hi) / 2);
    EXPECT_EQ(h.kind, BandHit::Small);
    EXPECT_EQ(h.category, merged.small_categories[0]);
    found = true;
  }
  EXPECT_TRUE(found);
}

TEST(AllocBands, TheBaselineAllocationsStartAtTheStep) {
  const Trace t = random_trace(4, true);
  const AllocBands bands(t);
  const TimelineRange& r = bands.range();
  EXPECT_LE(r.start_ns, t.step_start_ns);
  std::size_t before = 0;
  for (const AllocBand& b : bands.bands()) {
    EXPECT_GE(b.t0, r.start_ns);
    EXPECT_LE(b.t1, r.end_ns);
    EXPECT_LT(b.a.alloc_event, t.step_end_event);
    EXPECT_TRUE(b.a.free_event >= t.step_first_event);
    if (b.a.alloc_event < t.step_first_event) {
      EXPECT_EQ(b.t0, r.start_ns);
      ++before;
    }
  }
  EXPECT_GT(before, 0u);
}

// The runs of single bands a view skips at once: each run's summary is reached by one of its
// bands and holds every breakpoint of every band in it.
TEST(AllocBands, BlocksSumUpTheirBandsExactly) {
  for (unsigned seed : {5u, 6u}) {
    const Trace t = random_trace(seed, false);
    const AllocBands bands(t);
    for (std::uint64_t min_bytes : {0ull, 3ull}) {
      const AllocLayout L = layout_bands(bands, all_categories(), min_bytes);
      ASSERT_GT(L.size(), AllocLayout::kBlock);  // several runs
      ASSERT_EQ(L.blocks.size(), (L.size() + AllocLayout::kBlock - 1) / AllocLayout::kBlock);
      for (std::size_t i = 0; i < L.blocks.size(); ++i) {
        const AllocLayout::Block& blk = L.blocks[i];
        std::int64_t t1 = 0;
        double lo = 1e300, hi = -1e300;
        for (std::size_t k = i * AllocLayout::kBlock; k < std::min(L.size(), (i + 1) * AllocLayout::kBlock); ++k) {
          t1 = std::max(t1, bands.bands()[L.big[k]].t1);
          const double bytes = static_cast<double>(bands.bands()[L.big[k]].a.bytes);
          for (std::size_t j = L.offsets[k]; j < L.offsets[k + 1]; ++j) {
            lo = std::min(lo, L.points[j].y);
            hi = std::max(hi, L.points[j].y + bytes);
          }
        }
        EXPECT_EQ(blk.t1, t1);
        EXPECT_EQ(blk.lowest, lo);
        EXPECT_EQ(blk.highest, hi);
      }
    }
    // The sizes that tell two thresholds' layouts apart.
    std::vector<std::uint64_t> sizes;
    for (const AllocBand& b : bands.bands()) sizes.push_back(b.a.bytes);
    std::sort(sizes.begin(), sizes.end());
    EXPECT_EQ(bands.sortedSizes(), sizes);
  }
}

}  // namespace
}  // namespace remat
