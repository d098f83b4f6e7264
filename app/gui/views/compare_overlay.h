// The compare view's overlay: the device total of several runs as lines on one plot, over
// absolute time or over the fraction of each run's step, downsampled per zoom step keeping each
// bucket's highest point. Lines take their policy's color; repeats of a policy are dashed.
#pragma once
#include <vector>

#include "run_entry.h"
#include "views/memory_timeline_view.h"
#include "views/plot_view.h"

class QCPRange;

namespace remat::gui {

class OverlayTimelineView : public PlotView {
  Q_OBJECT
 public:
  explicit OverlayTimelineView(QWidget* parent = nullptr);
  void setRuns(const std::vector<RunEntry>& runs, TimeMode mode);
  QCPRange dataTimeRange() const;
  void resetZoom() override;
  int lineCount() const { return static_cast<int>(series_.size()); }
  double plottedMaximum(int line) const;

 private:
  struct Series {
    std::vector<double> x, y;  // keys in the current mode, device total
  };
  void updateVisible();
  void clampRange(const QCPRange& r);
  std::vector<Series> series_;
  double extent_ = 1, ymax_ = 1;
  bool clamping_ = false;
};

}  // namespace remat::gui
