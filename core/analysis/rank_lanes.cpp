#include "core/analysis/rank_lanes.h"

#include <algorithm>

namespace remat {

RankLanes rank_lanes(const std::vector<const Trace*>& ranks) {
  RankLanes out;
  std::vector<std::vector<Span>> rows;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    std::vector<Span> compute, comm;
    if (const Trace* t = ranks[r]) {
      const std::int64_t zero = t->step_start_ns;
      out.duration = std::max(out.duration, t->step_end_ns - t->step_start_ns);
      for (std::uint32_t i = 0; i < t->ops.size(); ++i) {
        const OpRecord& o = t->ops[i];
        const std::int64_t a = o.start_ns - zero, b = std::max(o.end_ns, o.start_ns) - zero;
        out.duration = std::max(out.duration, b);
        if (o.stream == Stream::Comm) comm.push_back({a, b, i, kCommColor});
        else compute.push_back({a, b, i, static_cast<std::uint8_t>(o.phase)});
      }
    }
    auto by_start = [](const Span& x, const Span& y) { return x.start < y.start; };
    std::stable_sort(compute.begin(), compute.end(), by_start);
    std::stable_sort(comm.begin(), comm.end(), by_start);
    rows.push_back(std::move(compute));
    out.lanes.push_back({static_cast<int>(r), Stream::Compute});
    rows.push_back(std::move(comm));
    out.lanes.push_back({static_cast<int>(r), Stream::Comm});
  }
  out.rows = SpanRows(std::move(rows));
  return out;
}

std::vector<RankPeak> rank_peaks(const std::vector<const Trace*>& ranks) {
  std::vector<RankPeak> out;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    RankPeak p;
    p.rank = static_cast<int>(r);
    if (const Trace* t = ranks[r]) {
      p.complete = t->complete;
      p.measured = t->peak_bytes;
      p.predicted = t->predicted_peak_bytes;
    }
    out.push_back(p);
  }
  return out;
}

const OpRecord* lane_op(const RankLanes& l, const std::vector<const Trace*>& ranks, std::size_t row, std::uint32_t index) {
  if (row >= l.lanes.size()) return nullptr;
  const std::size_t r = static_cast<std::size_t>(l.lanes[row].rank);
  if (r >= ranks.size() || !ranks[r] || index >= ranks[r]->ops.size()) return nullptr;
  return &ranks[r]->ops[index];
}

}  // namespace remat
