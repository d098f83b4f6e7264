// SpanRows' levels of detail: from a coarse level, every span at least a column wide is still
// drawn exactly as it is, every span is counted once, and a zoomed-out draw stays at about a
// bar per column.
#include <gtest/gtest.h>

#include <map>

#include "core/analysis/downsample.h"

namespace remat {
namespace {

TEST(SpanRows, CoarseLevelsKeepWideSpansExactAndCountEverySpan) {
  // 300,000 spans of 10 ns, 2 ns apart, and every 997th one 40 µs long.
  std::vector<Span> row;
  std::int64_t now = 0;
  for (std::uint32_t i = 0; i < 300000; ++i) {
    const std::int64_t len = i % 997 == 0 ? 40000 : 10;
    row.push_back({now, now + len, i, static_cast<std::uint8_t>(i % 3)});
    now += len + 2;
  }
  const SpanRows rows({row});
  for (std::int64_t div : {1, 7, 60, 900}) {
    const std::int64_t t0 = now / 3, t1 = t0 + now / div;
    const std::size_t pixels = 1200;
    const double col = static_cast<double>(t1 - t0) / pixels;
    const auto bars = rows.visible(0, t0, t1, pixels);
    std::map<std::uint32_t, DrawSpan> single;
    std::uint64_t counted = 0;
    for (const DrawSpan& b : bars) {
      counted += b.count;
      if (b.count == 1) single[b.index] = b;
    }
    std::uint64_t meeting = 0, wide = 0;
    for (const Span& s : row) {
      if (s.end < t0 || s.start > t1) continue;
      ++meeting;
      if (static_cast<double>(s.end - s.start) < col) continue;
      ++wide;
      auto it = single.find(s.index);
      ASSERT_NE(it, single.end()) << "span " << s.index << " merged at 1/" << div;
      EXPECT_EQ(it->second.start, s.start);
      EXPECT_EQ(it->second.end, s.end);
      EXPECT_EQ(it->second.color, s.color);
    }
    EXPECT_EQ(counted, meeting) << "at 1/" << div;
    EXPECT_LE(bars.size(), 2 * pixels + wide) << "at 1/" << div;
    if (div == 1) EXPECT_GT(wide, 200u);
  }
}

}  // namespace
}  // namespace remat
