// The line over the run view: what ran and where, its peak, its step time over the counted steps
// (median and min–max) and which step the plots show; a run that stopped early says how far it
// got and the highest device bytes it reached.
#pragma once
#include <QString>

#include "core/trace/trace.h"

namespace remat::gui {

struct StepTimes {
  int counted = 0;                      // counted steps that finished
  double median = 0, min = 0, max = 0;  // their times, ms
  double last = 0;                      // the last one's (the step the plots show), ms
};
StepTimes step_times(const Trace& t);

// Highest device bytes over what the memory timeline plots (for a run that stopped before its
// last step: every event of the run), so the header and the plot's peak marker agree.
std::uint64_t plotted_peak_bytes(const Trace& t);

// Rich text.
QString run_header(const Trace& t);
// What the Timeline page says in place of the op timeline of a run that has no ops, agreeing
// with the header about how far it got.
QString no_ops_note(const Trace& t);

}  // namespace remat::gui
