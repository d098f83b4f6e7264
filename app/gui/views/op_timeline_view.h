// The op / kernel timeline of a run's last counted step: one row per stream (compute, copies to
// and from the host, host work), bars colored by phase, the op's name, block, phase, duration,
// FLOPs and bytes on hover. Sub-pixel ops are merged in core per zoom step.
#pragma once
#include <memory>

#include "core/trace/trace.h"
#include "views/span_timeline_view.h"

namespace remat::gui {

class OpTimelineView : public SpanTimelineView {
  Q_OBJECT
 public:
  explicit OpTimelineView(QWidget* parent = nullptr);
  // Times are drawn relative to `origin` (the memory timeline's), `duration` long.
  void setTrace(std::shared_ptr<const Trace> t, std::int64_t origin, std::int64_t duration);

 protected:
  QString describe(const Span& s, int row) const override;

 private:
  std::shared_ptr<const Trace> trace_;
  std::vector<Stream> streams_;  // per row
};

}  // namespace remat::gui
