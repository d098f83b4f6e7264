#include "core/analysis/memory_timeline.h"

#include <algorithm>
#include <string>

#include "core/util/error.h"

namespace remat {

TimelineRange timeline_range(const Trace& t) {
  TimelineRange r;
  const std::size_t n = t.events.size();
  const bool stepped = t.step_end_ns > t.step_start_ns && t.step_first_event <= n;
  if (!stepped) {
    r.whole_run = true;
    r.first = 0;
    r.end = n;
    r.start_ns = n ? t.events.front().t_ns : 0;
    r.end_ns = n ? t.events.back().t_ns : 0;
    return r;
  }
  r.first = t.step_first_event;
  if (t.step_end_event >= t.step_first_event && t.step_end_event <= n && t.step_end_event > 0) {
    r.end = t.step_end_event;
  } else {
    // Traces without the end index: the step's events are those up to its end time.
    r.end = r.first;
    while (r.end < n && t.events[r.end].t_ns <= t.step_end_ns) ++r.end;
  }
  r.start_ns = t.step_start_ns;
  r.end_ns = t.step_end_ns;
  if (r.end > r.first) {
    r.start_ns = std::min(r.start_ns, t.events[r.first].t_ns);
    r.end_ns = std::max(r.end_ns, t.events[r.end - 1].t_ns);
  }
  return r;
}

void for_each_timeline_point(const Trace& t, const std::function<void(const TimelinePoint&)>& f) {
  const TimelineRange r = timeline_range(t);
  TimelinePoint p;
  // A trace read from disk keeps every sum within limits::kMemoryBytes (run_dir_read.cpp); one
  // built in memory is checked here, so a sum that would wrap is an error, not a wrong figure.
  auto apply = [&p, &t](std::size_t i) {
    const MemoryEvent& e = t.events[i];
    std::int64_t& c = p.live[static_cast<int>(e.category)];
    std::int64_t& s = e.space == Space::Device ? p.device : p.host;
    if (__builtin_add_overflow(c, e.delta, &c) || __builtin_add_overflow(s, e.delta, &s))
      throw Error("memory event " + std::to_string(i) + " (" + std::to_string(e.delta) +
                  " bytes): the live bytes of " + to_string(e.category) + " or " + to_string(e.space) +
                  " overflow");
  };
  for (std::size_t i = 0; i < r.first; ++i) apply(i);
  p.t_ns = r.start_ns;
  p.event = -1;
  f(p);
  for (std::size_t i = r.first; i < r.end; ++i) {
    apply(i);
    p.t_ns = t.events[i].t_ns;
    p.event = static_cast<std::int64_t>(i);
    f(p);
  }
  p.t_ns = r.end_ns;
  p.event = -1;
  f(p);
}

MemoryTimeline memory_timeline(const Trace& t) {
  MemoryTimeline m;
  m.range = timeline_range(t);
  m.points.reserve(m.range.end - m.range.first + 2);
  for_each_timeline_point(t, [&m](const TimelinePoint& p) {
    if (m.points.empty() || p.device > m.peak_device) {
      m.peak_device = p.device;
      m.peak_point = m.points.size();
    }
    m.points.push_back(p);
  });
  return m;
}

}  // namespace remat
