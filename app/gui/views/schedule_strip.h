// The schedule strip: one row per block, a bar for each schedule action over time (forward,
// recompute, backward, offload, prefetch, drop), so one sees which block is in which state;
// the head has a row of its own under the blocks, and other actions outside the blocks
// (embedding, optimizer) go on a last row. A forward run again
// from a checkpoint during the backward sweep is drawn as the recomputation it is.
#pragma once
#include <memory>

#include "core/trace/trace.h"
#include "views/span_timeline_view.h"

namespace remat::gui {

class ScheduleStrip : public SpanTimelineView {
  Q_OBJECT
 public:
  explicit ScheduleStrip(QWidget* parent = nullptr);
  void setTrace(std::shared_ptr<const Trace> t, std::int64_t origin, std::int64_t duration);

 protected:
  QString describe(const Span& s, int row) const override;

 private:
  std::shared_ptr<const Trace> trace_;
};

}  // namespace remat::gui
