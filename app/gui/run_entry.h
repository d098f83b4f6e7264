// A run the app knows: its trace (immutable, shared by every view), where it is saved, and the
// label the run list and the charts show for it.
#pragma once
#include <QString>
#include <memory>

#include "core/trace/trace.h"

namespace remat::gui {

struct RunEntry {
  std::shared_ptr<const Trace> trace;
  QString dir;    // the run directory it was saved to or read from (may be empty)
  QString label;  // "#3 tiny · selective"
  int id = 0;     // its number in this session (its color)
};

}  // namespace remat::gui
