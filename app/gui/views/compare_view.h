// Compare runs side by side: the memory timelines of the runs checked in the run list stacked
// with one shared, synchronized time axis (absolute, or normalized to each run's step time) and
// one shared byte scale, or overlaid on one plot; bars of peak memory and of step time with the
// reduction and overhead against the `none` run; and the peak-versus-time scatter of every run.
#pragma once
#include <QList>
#include <QWidget>
#include <vector>

#include "run_entry.h"
#include "views/memory_timeline_view.h"

class QCPRange;
class QLabel;
class QRadioButton;
class QStackedWidget;
class QVBoxLayout;

namespace remat::gui {

class OverlayTimelineView;
class RunBarChart;
class FrontierScatter;

class CompareView : public QWidget {
  Q_OBJECT
 public:
  explicit CompareView(QWidget* parent = nullptr);
  // `compared`: the timelines and bars; `all`: the scatter. Built now when the view is visible,
  // else when it is next shown.
  void setRuns(const std::vector<RunEntry>& compared, const std::vector<RunEntry>& all);
  void setTimeMode(TimeMode m);
  TimeMode timeMode() const { return mode_; }
  void setOverlay(bool on);
  bool overlay() const { return overlay_on_; }

  QList<MemoryTimelineView*> timelines() const { return timelines_; }
  OverlayTimelineView* overlayView() const { return overlay_; }
  RunBarChart* peakChart() const { return peak_; }
  RunBarChart* timeChart() const { return time_; }
  FrontierScatter* scatter() const { return scatter_; }
  void resetZoom();

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  void rebuild();
  void sync(QObject* from, const QCPRange& r);

  std::vector<RunEntry> compared_, all_;
  TimeMode mode_ = TimeMode::Absolute;
  bool overlay_on_ = false;
  QLabel* hint_;
  QRadioButton* absolute_;
  QRadioButton* normalized_;
  QRadioButton* stacked_;
  QRadioButton* overlaid_;
  QStackedWidget* pages_;
  QWidget* stack_box_;
  QVBoxLayout* stack_layout_;
  QList<MemoryTimelineView*> timelines_;
  OverlayTimelineView* overlay_;
  RunBarChart* peak_;
  RunBarChart* time_;
  FrontierScatter* scatter_;
  bool syncing_ = false;
  bool dirty_ = false;  // rebuilt when next shown (the timelines of big runs take a while)
};

}  // namespace remat::gui
