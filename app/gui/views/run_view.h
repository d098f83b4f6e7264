// One run read at a glance: the header (what ran, its peak, the median step time with its
// spread and which step the plots show), the memory timeline on top, the schedule strip and the
// op / kernel timeline below it (its details, range and statistics panel on the right), their
// time axes kept in step (zooming or panning one moves the others), their plot areas aligned to
// the pixel. With no run shown: the start page instead.
//
// Showing a run builds what the views draw of it (run_view_data.h) on a worker thread: the page
// says it is loading meanwhile, and the window goes on. Another run (or none) asked for in the
// meantime drops that load; a load that fails shows its error in the page and in loadFailed.
#pragma once
#include <QWidget>
#include <atomic>
#include <memory>

#include "core/trace/trace.h"

class QCPRange;
class QLabel;
class QProgressBar;
class QStackedWidget;

namespace remat::gui {

class MemoryTimelineView;
class OpTimelinePane;
class OpTimelineView;
class ScheduleStrip;
struct RunViewData;

class RunView : public QWidget {
  Q_OBJECT
 public:
  explicit RunView(QWidget* parent = nullptr);
  // Loads `t` (nullptr: the start page at once; the run shown: shown again at once); loaded()
  // once its views show it.
  void setTrace(std::shared_ptr<const Trace> t, const QString& title);
  // The run shown, or being loaded.
  const std::shared_ptr<const Trace>& trace() const { return trace_; }
  // Shows data built before (prepare_run_view), on this thread.
  void setData(std::shared_ptr<const RunViewData> d, const QString& title);
  bool loading() const { return loading_; }
  bool loadingPageShown() const;
  QString loadingText() const;  // what the loading page says (the error, after a failed load)

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
  // What the page says in place of the op timeline when the run has no ops ("" when it has).
  QString noOpsText() const;

 signals:
  void loaded();
  void loadFailed(const QString& error);

 private:
  void sync(QObject* from, const QCPRange& r);
  void showStartPage(bool on);

  std::shared_ptr<const Trace> trace_;
  std::shared_ptr<const RunViewData> data_;  // of the run shown
  QLabel* summary_;
  MemoryTimelineView* memory_;
  ScheduleStrip* schedule_;
  OpTimelinePane* op_pane_;
  OpTimelineView* ops_;
  QLabel* no_ops_;
  QStackedWidget* stack_;
  QWidget* content_;
  QWidget* start_ = nullptr;
  QWidget* loading_page_;
  QLabel* loading_label_;
  QProgressBar* loading_bar_;
  bool syncing_ = false;
  bool loading_ = false;
  std::uint64_t load_ = 0;  // the load in flight, by number; older ones are dropped
  std::shared_ptr<std::atomic<bool>> cancel_;
};

}  // namespace remat::gui
