#include "core/analysis/downsample.h"

#include <algorithm>
#include <limits>

namespace remat {

std::vector<std::size_t> downsample_indices(std::span<const double> x, std::span<const double> y,
                                            double x0, double x1, std::size_t buckets) {
  std::vector<std::size_t> out;
  const std::size_t n = std::min(x.size(), y.size());
  if (n == 0) return out;
  if (x1 < x0) std::swap(x0, x1);
  buckets = std::max<std::size_t>(buckets, 1);
  const std::size_t lo = static_cast<std::size_t>(std::lower_bound(x.begin(), x.begin() + n, x0) - x.begin());
  const std::size_t hi = static_cast<std::size_t>(std::upper_bound(x.begin(), x.begin() + n, x1) - x.begin());
  if (lo > 0) out.push_back(lo - 1);
  if (hi - lo <= 4 * buckets) {
    for (std::size_t i = lo; i < hi; ++i) out.push_back(i);
  } else {
    out.reserve(4 * buckets + 2);
    const double width = (x1 - x0) / static_cast<double>(buckets);
    std::size_t cur = std::numeric_limits<std::size_t>::max();
    std::size_t first = 0, last = 0, imin = 0, imax = 0;
    auto flush = [&] {
      std::size_t v[4] = {first, imin, imax, last};
      std::sort(v, v + 4);
      for (int k = 0; k < 4; ++k)
        if (k == 0 || v[k] != v[k - 1]) out.push_back(v[k]);
    };
    for (std::size_t i = lo; i < hi; ++i) {
      std::size_t b = width > 0 ? static_cast<std::size_t>((x[i] - x0) / width) : 0;
      if (b >= buckets) b = buckets - 1;
      if (b != cur) {
        if (cur != std::numeric_limits<std::size_t>::max()) flush();
        cur = b;
        first = last = imin = imax = i;
        continue;
      }
      last = i;
      if (y[i] < y[imin]) imin = i;
      if (y[i] > y[imax]) imax = i;
    }
    if (cur != std::numeric_limits<std::size_t>::max()) flush();
  }
  if (hi < n) out.push_back(hi);
  return out;
}

namespace {

using span_detail::LodSpan;

LodSpan lod(const Span& s) { return {s.start, s.end, s.index, s.color, 1, s.end - s.start}; }

// Spans in start order to bars at columns `col` ns wide: a span at least a column wide is kept as
// it is; narrower ones join the open bar while they start less than a column after it ends and
// the bar stays under two columns, standing for the longest of them.
template <class Out>
struct Merger {
  double col;
  Out out;
  bool open = false;
  LodSpan cur{};
  void add(const LodSpan& s) {
    if (static_cast<double>(s.end - s.start) >= col) {
      close();
      out(s);
      return;
    }
    if (open && static_cast<double>(s.start - cur.end) < col &&
        static_cast<double>(std::max(cur.end, s.end) - cur.start) < 2.0 * col) {
      cur.end = std::max(cur.end, s.end);
      cur.count += s.count;
      if (s.longest > cur.longest) {
        cur.longest = s.longest;
        cur.index = s.index;
        cur.color = s.color;
      }
      return;
    }
    close();
    cur = s;
    open = true;
  }
  void close() {
    if (open) out(cur);
    open = false;
  }
};
template <class Out>
Merger<Out> merger(double col, Out out) {
  return Merger<Out>{col, std::move(out)};
}

constexpr std::size_t kLevelMin = 4096;  // rows with fewer spans keep no coarser levels

}  // namespace

SpanRows::SpanRows(std::vector<std::vector<Span>> rows) : rows_(std::move(rows)) {
  longest_.assign(rows_.size(), 0);
  bool any = false;
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    auto& row = rows_[r];
    std::stable_sort(row.begin(), row.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
    for (auto& s : row) {
      if (s.end < s.start) s.end = s.start;
      longest_[r] = std::max(longest_[r], s.end - s.start);
      if (!any) {
        min_start_ = s.start;
        max_end_ = s.end;
        any = true;
      }
      min_start_ = std::min(min_start_, s.start);
      max_end_ = std::max(max_end_, s.end);
    }
    total_ += row.size();
  }
  levels_.resize(rows_.size());
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    const auto& row = rows_[r];
    if (row.size() < kLevelMin) continue;
    std::int64_t hi = row.front().end;
    for (const Span& s : row) hi = std::max(hi, s.end);
    double col = std::max(1.0, static_cast<double>(hi - row.front().start) / 262144.0);
    std::vector<LodSpan> prev;
    bool from_row = true;  // no level kept yet: merge the row itself
    for (int k = 0; k < 16; ++k, col *= 4) {
      Level lv;
      lv.col = col;
      auto m = merger(col, [&lv](const LodSpan& s) {
        lv.spans.push_back(s);
        lv.longest = std::max(lv.longest, s.end - s.start);
      });
      if (from_row)
        for (const Span& s : row) m.add(lod(s));
      else
        for (const LodSpan& s : prev) m.add(s);
      m.close();
      const std::size_t before = from_row ? row.size() : prev.size();
      if (lv.spans.size() * 10 > before * 9) continue;  // little merged at this width: go coarser
      from_row = false;
      prev = lv.spans;
      levels_[r].push_back(std::move(lv));
      if (prev.size() < kLevelMin / 2) break;
    }
  }
}

std::size_t SpanRows::first_meeting(std::size_t r, std::int64_t t0) const {
  // A span meets [t0, ..] when its end >= t0; no span starting before t0 - longest can.
  const auto& row = rows_[r];
  const std::int64_t from = t0 - longest_[r];
  std::size_t i = static_cast<std::size_t>(
      std::lower_bound(row.begin(), row.end(), from, [](const Span& s, std::int64_t v) { return s.start < v; }) -
      row.begin());
  while (i < row.size() && row[i].end < t0 && row[i].start < t0) ++i;
  return i;
}

std::vector<DrawSpan> SpanRows::visible(std::size_t r, std::int64_t t0, std::int64_t t1,
                                        std::size_t pixels) const {
  std::vector<DrawSpan> out;
  if (r >= rows_.size()) return out;
  if (t1 < t0) std::swap(t0, t1);
  pixels = std::max<std::size_t>(pixels, 1);
  const double col = std::max(1.0, static_cast<double>(t1 - t0) / static_cast<double>(pixels));
  auto m = merger(col, [&out](const LodSpan& s) { out.push_back({s.start, s.end, s.index, s.color, s.count}); });
  // The coarsest level merged at no more than this column width.
  const Level* level = nullptr;
  for (const Level& lv : levels_[r])
    if (lv.col <= col) level = &lv;
  if (level) {
    const auto& v = level->spans;
    auto it = std::lower_bound(v.begin(), v.end(), t0 - level->longest,
                               [](const LodSpan& s, std::int64_t x) { return s.start < x; });
    for (; it != v.end() && it->start <= t1; ++it)
      if (it->end >= t0) m.add(*it);
  } else {
    const auto& row = rows_[r];
    for (std::size_t i = first_meeting(r, t0); i < row.size() && row[i].start <= t1; ++i)
      if (row[i].end >= t0) m.add(lod(row[i]));
  }
  m.close();
  return out;
}

const Span* SpanRows::at(std::size_t r, std::int64_t t, std::int64_t slack) const {
  if (r >= rows_.size()) return nullptr;
  const auto& row = rows_[r];
  const Span* best = nullptr;
  for (std::size_t i = first_meeting(r, t - slack); i < row.size() && row[i].start <= t + slack; ++i) {
    const Span& s = row[i];
    if (s.end + slack < t || s.start - slack > t) continue;
    const bool inside = s.start <= t && t <= s.end;
    const bool best_inside = best && best->start <= t && t <= best->end;
    if (!best || (inside && !best_inside) ||
        (inside == best_inside && s.end - s.start < best->end - best->start))
      best = &s;
  }
  return best;
}

}  // namespace remat
