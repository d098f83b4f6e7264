// One run read at a glance: the header (what ran, its peak, the median step time with its
// spread and which step the plots show), the memory timeline on top, the schedule strip and the
// op / kernel timeline below it (its details, range and statistics panel on the right), their
// time axes kept in step (zooming or panning one moves the others), their plot areas aligned to
// the pixel. With no run shown: the start page instead.
#pragma once
#include <QWidget>
#include <memory>

#include "core/trace/trace.h"

class QCPRange;
class QLabel;
class QStackedWidget;

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
  // The page shown instead of the plots while no run is shown (the view takes it).
  void setStartPage(QWidget* page);
  bool startPageShown() const;
  QString headerText() const;  // rich text

 private:
  void sync(QObject* from, const QCPRange& r);
  void showStartPage(bool on);

  std::shared_ptr<const Trace> trace_;
  QLabel* summary_;
  MemoryTimelineView* memory_;
  ScheduleStrip* schedule_;
  OpTimelinePane* op_pane_;
  OpTimelineView* ops_;
  QLabel* no_ops_;
  QStackedWidget* stack_;
  QWidget* content_;
  QWidget* start_ = nullptr;
  bool syncing_ = false;
};

}  // namespace remat::gui
