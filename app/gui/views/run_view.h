// One run read at a glance: the memory timeline on top, the schedule strip and the op / kernel
// timeline below it (its details, range and statistics panel on the right), their time axes kept in step (zooming or panning one moves the others),
// their plot areas aligned to the pixel.
#pragma once
#include <QWidget>
#include <memory>

#include "core/trace/trace.h"

class QCPRange;
class QLabel;

namespace remat::gui {

class MemoryTimelineView;
class OpTimelinePane;
class OpTimelineView;
class ScheduleStrip;

class RunView : public QWidget {
  Q_OBJECT
 public:
  explicit RunView(QWidget* parent = nullptr);
  void setTrace(std::shared_ptr<const Trace> t, const QString& title);
  const std::shared_ptr<const Trace>& trace() const { return trace_; }

  MemoryTimelineView* memory() const { return memory_; }
  OpTimelineView* ops() const { return ops_; }
  OpTimelinePane* opPane() const { return op_pane_; }
  ScheduleStrip* schedule() const { return schedule_; }
  void resetZoom();
  void zoom(double factor);  // < 1 zooms in, around the center

 private:
  void sync(QObject* from, const QCPRange& r);

  std::shared_ptr<const Trace> trace_;
  QLabel* summary_;
  MemoryTimelineView* memory_;
  ScheduleStrip* schedule_;
  OpTimelinePane* op_pane_;
  OpTimelineView* ops_;
  bool syncing_ = false;
};

}  // namespace remat::gui
