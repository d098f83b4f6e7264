// What the "all ranks" view of a run of several ranks draws, without Qt: each rank's peak
// (measured, and predicted where the rank has one) and the ranks' op timelines stacked on one
// time axis, each rank a lane of two rows, its compute ops and its collectives (stream comm).
// Every rank has its own clock (its own process), so the lanes are aligned at the start of each
// rank's last counted step: time 0 is that step's start on every rank.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/downsample.h"
#include "core/trace/trace.h"

namespace remat {

struct RankPeak {
  int rank = 0;
  bool complete = false;
  std::uint64_t measured = 0, predicted = 0;  // predicted 0: none
};

struct RankLaneRow {
  int rank = 0;          // index into the ranks given
  Stream stream = Stream::Compute;  // Compute (every stream but comm) or Comm
};

// The color class of a span: its phase (0 .. kNumPhases - 1), or kCommColor for a collective.
inline constexpr std::uint8_t kCommColor = kNumPhases;

struct RankLanes {
  SpanRows rows;                  // two per rank, rank 0 first; Span::index into that rank's ops
  std::vector<RankLaneRow> lanes;  // what each row is
  std::int64_t duration = 1;      // the longest rank's last counted step (ns), at least 1
};

// `ranks[i]` may be null (a rank that left no run): its rows are empty.
RankLanes rank_lanes(const std::vector<const Trace*>& ranks);
std::vector<RankPeak> rank_peaks(const std::vector<const Trace*>& ranks);
// The op a span of row `row` stands for; nullptr when there is none.
const OpRecord* lane_op(const RankLanes& l, const std::vector<const Trace*>& ranks, std::size_t row, std::uint32_t index);

}  // namespace remat
