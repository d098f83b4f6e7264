// A run of several ranks (ranks.json over rank-N/): a rank picker (a rank shows its run view as
// any run does: rankChosen) and the "all ranks" view, the peak of every rank as bars (measured
// and predicted) above each rank's device bytes over its step (a memory lane per rank) and the
// ranks' op timelines, stacked on one time axis, a lane per rank with its collectives on their own
// row and arrows between each collective and its partners (the Flows box).
#pragma once
#include <QJsonObject>
#include <QString>
#include <QWidget>
#include <memory>
#include <vector>

#include "core/trace/ranks_dir.h"

class QCheckBox;
class QComboBox;
class QLabel;

namespace remat::gui {

class RanksMemoryView;
class RanksPeakChart;
class RanksTimelineView;

class RanksView : public QWidget {
  Q_OBJECT
 public:
  explicit RanksView(QWidget* parent = nullptr);
  // The run at `dir` and its ranks' traces in rank order (null: not read, or none left).
  void setRanks(const QString& dir, const RanksDir& r, std::vector<std::shared_ptr<const Trace>> traces);
  void clear();
  QString dir() const { return dir_; }
  const RanksDir& ranks() const { return ranks_; }
  QComboBox* picker() const { return picker_; }
  RanksPeakChart* peaks() const { return peaks_; }
  RanksTimelineView* timelines() const { return timelines_; }
  RanksMemoryView* memory() const { return memory_; }
  QCheckBox* flowsBox() const { return flows_; }
  // What is left out of the charts and why (a rank of another job), "" when nothing.
  QString banner() const;
  QString title() const;
  // For checks of a screenshot of `window` (device pixel ratio `dpr`): where the ranks' timeline
  // plot and each of its rows are, the collectives' color, where the peak bars' plot is.
  QJsonObject screenshotGeometry(const QWidget* window, double dpr) const;

 signals:
  // The user picked rank `rank` of the run at `dir`.
  void rankChosen(const QString& dir, int rank);

 private:
  QString dir_;
  RanksDir ranks_;
  QLabel* title_;
  QComboBox* picker_;
  RanksPeakChart* peaks_;
  RanksTimelineView* timelines_;
  RanksMemoryView* memory_;
  QCheckBox* flows_;
  QLabel* hint_;
  QLabel* banner_;
};

}  // namespace remat::gui
