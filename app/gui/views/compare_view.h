// Compare runs side by side, like with like: the checked runs are grouped by model, shape, dtype
// and device (core/analysis/run_groups.h), and a banner says so when more than one group is
// checked. Per group: the memory timelines stacked with one synchronized time axis (absolute, or
// normalized to each run's step time) and one byte scale, or overlaid on one plot; bars of peak
// memory and of step time (median, min-max whisker) with the reduction and overhead against the
// group's `none` run; the group's peak-versus-time scatter with its frontier; and, with the
// plugins at hand (setRegistry), the budget policy's recompute cost against the activation budget
// for the group's model with its runs as points (core/analysis/frontier.h). Incomplete
// runs that are checked show their timeline on their own scale and enter no chart.
#pragma once
#include <QList>
#include <QWidget>
#include <map>
#include <memory>
#include <vector>

#include "core/analysis/frontier.h"
#include "core/plugin/registry.h"
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
class BudgetFrontierChart;

class CompareView : public QWidget {
  Q_OBJECT
 public:
  explicit CompareView(QWidget* parent = nullptr);
  // The checked runs. Built now when the view is visible, else when it is next shown.
  void setRuns(const std::vector<RunEntry>& compared);
  // The plugins that plan the budget line (none: no line).
  void setRegistry(const PolicyRegistry* registry) { registry_ = registry; }
  void setTimeMode(TimeMode m);
  TimeMode timeMode() const { return mode_; }
  void setOverlay(bool on);
  bool overlay() const { return overlay_on_; }

  QList<MemoryTimelineView*> timelines() const { return timelines_; }
  // The group of each timeline (an index into the groups; -1 for an incomplete run).
  QList<int> timelineGroups() const { return timeline_groups_; }
  int groupCount() const { return static_cast<int>(groups_.size()); }
  QString banner() const;
  OverlayTimelineView* overlayView(int group = 0) const { return overlays_.value(group); }
  RunBarChart* peakChart(int group = 0) const { return peaks_.value(group); }
  RunBarChart* timeChart(int group = 0) const { return times_.value(group); }
  FrontierScatter* scatter(int group = 0) const { return scatters_.value(group); }
  BudgetFrontierChart* budgetFrontier(int group = 0) const { return budget_frontiers_.value(group); }
  void resetZoom();

 signals:
  void plotsRebuilt();  // the plots were made anew (for whoever follows their clicks)

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  struct Group {
    QString label;
    std::vector<RunEntry> runs;
  };
  void rebuild();
  void clear();
  void addTimelines(const std::vector<RunEntry>& runs, int group);
  void addCharts(const Group& g);
  void budgetLine(const Group& g, BudgetFrontierChart* chart);
  void sync(QObject* from, const QCPRange& r);

  std::vector<RunEntry> compared_;
  std::vector<Group> groups_;
  TimeMode mode_ = TimeMode::Absolute;
  bool overlay_on_ = false;
  QLabel* hint_;
  QLabel* banner_;
  QRadioButton* absolute_;
  QRadioButton* normalized_;
  QRadioButton* stacked_;
  QRadioButton* overlaid_;
  QStackedWidget* pages_;
  QVBoxLayout* stack_layout_;
  QVBoxLayout* overlay_layout_;
  QVBoxLayout* chart_layout_;
  QList<QWidget*> made_;  // every widget a rebuild made, removed by the next
  QList<MemoryTimelineView*> timelines_;
  QList<int> timeline_groups_;
  QList<OverlayTimelineView*> overlays_;
  QList<RunBarChart*> peaks_, times_;
  QList<FrontierScatter*> scatters_;
  QList<BudgetFrontierChart*> budget_frontiers_;
  const PolicyRegistry* registry_ = nullptr;
  // Each model's budget line (or why it has none), planned once: a rebuild (a run checked, the
  // time mode) does not plan it again.
  std::map<std::string, std::pair<std::shared_ptr<const Frontier>, QString>> budget_lines_;
  bool syncing_ = false;
  bool dirty_ = false;  // rebuilt when next shown (the timelines of big runs take a while)
};

}  // namespace remat::gui
