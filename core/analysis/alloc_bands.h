// The allocations of the memory timeline, each as its own band: every allocation alive over the
// timeline's range (memory_timeline.h), stacked in allocation order, so that at any time the
// live allocations lie on top of each other with no gap, the oldest at the bottom. When one is
// freed, every band above it drops by its bytes; a new one goes on top.
//
// A layout is computed for a set of shown categories and a size threshold: allocations of at
// least `min_bytes` are bands of their own (a polygon given as its bottom's breakpoints), the
// smaller ones are merged into one band per category, stacked above all the single ones. So the
// top of the layout at any time is the live bytes of the shown categories, whatever the
// threshold. host_offloaded is never stacked (the memory timeline draws it as a line).
//
// Time: a band is alive over [t0, t1). The state at time t is the one after every event at or
// before t. Times are clamped to the timeline's range and made non-decreasing in event order.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/live_tensors.h"
#include "core/analysis/memory_focus.h"
#include "core/analysis/memory_timeline.h"

namespace remat {

struct AllocBand {
  Allocation a;
  std::int64_t t0 = 0, t1 = 0;  // drawn over [t0, t1), within the timeline's range
  std::int64_t alloc_ns = 0;    // as recorded
  std::int64_t free_ns = -1;    // as recorded; -1 when never freed
};

// The allocations alive over the timeline's range, in allocation order (built once per trace).
class AllocBands {
 public:
  AllocBands() = default;
  explicit AllocBands(const Trace& t);

  const std::vector<AllocBand>& bands() const { return bands_; }
  const TimelineRange& range() const { return range_; }
  std::string label(const AllocBand& b) const { return allocation_label(b.a, names_); }
  const std::string& tensorName(const AllocBand& b) const;

  // For the layout: the band whose allocation or free event `i` is (npos when none), and the
  // event's time as the bands use it.
  static constexpr std::uint32_t npos = 0xffffffffu;
  std::uint32_t bandOfEvent(std::size_t i) const { return event_band_[i]; }
  std::int64_t eventTime(std::size_t i) const { return event_t_[i]; }
  std::size_t events() const { return event_band_.size(); }
  // The bytes of every band, in increasing order: two size thresholds give the same layout when
  // none lies between them.
  const std::vector<std::uint64_t>& sortedSizes() const { return sizes_; }

 private:
  TimelineRange range_;
  std::vector<AllocBand> bands_;
  std::vector<std::uint32_t> event_band_;  // per event before range_.end
  std::vector<std::int64_t> event_t_;
  std::vector<std::string> names_;
  std::vector<std::uint64_t> sizes_;
};

// A breakpoint of a band's bottom: from time t on, its bottom is y bytes.
struct BandPoint {
  std::int64_t t = 0;
  double y = 0;
};

// What lies at a point of the layout.
struct BandHit {
  enum Kind { None, Band, Small } kind = None;
  std::size_t band = 0;         // Band: index into AllocBands::bands()
  Category category = Category::Workspace;  // the band's, or the merged band's
  double bottom = 0, top = 0;   // bytes
};

// A single band's extent, to find the bands in view without reading every allocation.
struct BandExtent {
  std::int64_t t0 = 0, t1 = 0;  // the band's, as in AllocBand
  double bytes = 0;
  double highest = 0, lowest = 0;  // its bottom at t0 and at its last breakpoint (it only drops)
};

struct AllocLayout {
  CategorySet shown{};
  std::uint64_t min_bytes = 0;

  // The single bands, in allocation order: index into AllocBands::bands() and the breakpoints
  // of each, points[offsets[k], offsets[k + 1]), in time order, the first at the band's t0.
  std::vector<std::uint32_t> big;
  std::vector<std::size_t> offsets;
  std::vector<BandPoint> points;
  std::vector<BandExtent> extents;  // per single band; t0 never decreases with k
  // The single bands in runs of kBlock (k / kBlock), each run summed up, so a view skips a run
  // none of whose bands meets its time or byte range without reading them.
  static constexpr std::size_t kBlock = 256;
  struct Block {
    std::int64_t t1 = 0;              // the latest end of its bands
    double lowest = 0, highest = 0;  // the lowest bottom and the highest top any of them reaches
  };
  std::vector<Block> blocks;

  // The state after every time with an event of a stacked band: the time (ns since the range's
  // start), the top of the single bands, and per merged category (in stacking order, bottom
  // first) the top of its band.
  std::vector<double> step_x;
  std::vector<double> big_top;
  std::vector<Category> small_categories;
  std::vector<std::vector<double>> small_top;
  std::int64_t origin = 0;  // the range's start

  std::size_t size() const { return big.size(); }
  // The bottom of single band k at time t (its first breakpoint's before t0).
  double bottom(std::size_t k, std::int64_t t) const;
  // The step holding time t, or npos before the first.
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  std::size_t stepAt(std::int64_t t) const;
  // The height of the whole stack at time t.
  double top(std::int64_t t) const;
  // The band at (t, bytes); single bands alive within `slack` ns of t count, at their nearest
  // alive time.
  BandHit at(const AllocBands& bands, std::int64_t t, double bytes, std::int64_t slack = 0) const;
};

AllocLayout layout_bands(const AllocBands& bands, const CategorySet& shown, std::uint64_t min_bytes);

}  // namespace remat
