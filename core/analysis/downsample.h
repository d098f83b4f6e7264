// Downsampling for drawing at screen resolution: a series of a million points or a timeline of a
// million ops becomes a few thousand things to draw, chosen again for every zoom step. Each
// bucket keeps its highest (and lowest) point, so a peak is never averaged away, and op bars
// narrower than a pixel merge into one bar per pixel instead of vanishing.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace remat {

// Indices of the points of an x-sorted series worth drawing over [x0, x1] at `buckets` columns:
// per bucket its first and last point and the points with the lowest and highest value, in x
// order, plus the last point before x0 and the first after x1 so lines run off the edges. So the
// highest value drawn is the highest value of the range, exactly. With at most 4 * buckets
// points in the range, every point in it is returned.
std::vector<std::size_t> downsample_indices(std::span<const double> x, std::span<const double> y,
                                            double x0, double x1, std::size_t buckets);

// A bar on a timeline row: an op, a kernel or a schedule action.
struct Span {
  std::int64_t start = 0, end = 0;
  std::uint32_t index = 0;  // the record it stands for (e.g. into Trace::ops)
  std::uint8_t color = 0;   // the caller's color class (phase, action kind)
};

// What to draw for one row: a span, or several sub-pixel spans merged into one.
struct DrawSpan {
  std::int64_t start = 0, end = 0;
  std::uint32_t index = 0;  // the longest span of the merged ones
  std::uint8_t color = 0;   // its color
  std::uint32_t count = 1;  // spans merged
};

namespace span_detail {
// A span or several merged, with the length of the longest among them (the one it stands for).
struct LodSpan {
  std::int64_t start = 0, end = 0;
  std::uint32_t index = 0;
  std::uint8_t color = 0;
  std::uint32_t count = 1;
  std::int64_t longest = 0;
};
}  // namespace span_detail

// Spans grouped into rows, each row sorted by start. Spans on one row may overlap.
//
// A row of many spans also keeps coarser levels of detail, built once: the row merged by the
// same rule as visible() at column widths 4x apart. visible() starts from the coarsest level whose
// column is no wider than the one asked for, so a zoomed-out draw of a million spans reads a few
// thousand; a span at least a column wide is never merged at any level, so it is drawn exactly.
class SpanRows {
 public:
  SpanRows() = default;
  explicit SpanRows(std::vector<std::vector<Span>> rows);

  std::size_t rows() const { return rows_.size(); }
  std::size_t size() const { return total_; }
  const std::vector<Span>& row(std::size_t r) const { return rows_[r]; }
  std::int64_t min_start() const { return min_start_; }
  std::int64_t max_end() const { return max_end_; }

  // The spans of row `r` that meet [t0, t1], merged where they are narrower than one of `pixels`
  // columns and less than a column apart. Spans at least a column wide are kept as they are.
  std::vector<DrawSpan> visible(std::size_t r, std::int64_t t0, std::int64_t t1,
                                std::size_t pixels) const;
  // The span of row `r` under time t (the shortest one covering t), or nullptr; `slack` widens
  // each span by that much on both sides (a pixel's worth, for hovering).
  const Span* at(std::size_t r, std::int64_t t, std::int64_t slack = 0) const;

 private:
  std::size_t first_meeting(std::size_t r, std::int64_t t0) const;
  struct Level {
    double col = 1;  // column width (ns) it was merged at
    std::vector<span_detail::LodSpan> spans;
    std::int64_t longest = 0;
  };
  std::vector<std::vector<Span>> rows_;
  std::vector<std::int64_t> longest_;  // longest span per row, to search by start
  std::vector<std::vector<Level>> levels_;  // per row, finer to coarser
  std::size_t total_ = 0;
  std::int64_t min_start_ = 0, max_end_ = 0;
};

}  // namespace remat
