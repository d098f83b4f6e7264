// Live bytes per category over the last counted step, from the memory events: what
// memory_timeline.csv holds, what trace.json's memory counters show and what the desktop app
// plots. One source for all three, so they cannot disagree.
//
// The baseline is the live bytes at the step's start, replayed from every earlier event of the
// run (parameters, optimizer state and anything else allocated before the step). Then one point
// per event of the step, in order, with the state after that event, and a last point at the
// step's end. Points at the same time are kept (one per event), so the highest device total of
// the points is exactly the step's peak as the allocator measured it.
//
// A run that ended before finishing a counted step (out of memory, cancelled) has no last
// counted step; its timeline covers every event of the run from an empty baseline.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/trace/trace.h"

namespace remat {

struct TimelineRange {
  std::size_t first = 0, end = 0;        // events [first, end)
  std::int64_t start_ns = 0, end_ns = 0; // times of the first and last point
  bool whole_run = false;                // no completed counted step: every event
};

struct TimelinePoint {
  std::int64_t t_ns = 0;
  std::int64_t event = -1;  // index into Trace::events (and the row of memory_events.csv); -1 for
                            // the baseline point and the end point
  std::array<std::int64_t, kNumCategories> live{};  // live bytes per category, both spaces
  std::int64_t device = 0, host = 0;                // live bytes per space
};

TimelineRange timeline_range(const Trace& t);

// Calls f for every point in order (no allocation per point; for writers of big runs).
void for_each_timeline_point(const Trace& t, const std::function<void(const TimelinePoint&)>& f);

struct MemoryTimeline {
  TimelineRange range;
  std::vector<TimelinePoint> points;
  std::int64_t peak_device = 0;  // highest device total over the points
  std::size_t peak_point = 0;    // index of the first point that reaches it
};

MemoryTimeline memory_timeline(const Trace& t);

}  // namespace remat
