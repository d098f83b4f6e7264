// The peak memory of every rank of a run of several ranks as bars: measured, and next to it the
// simulator's prediction where the rank has one; an incomplete rank says so under its bar.
#pragma once
#include <vector>

#include "core/analysis/rank_lanes.h"
#include "views/plot_view.h"

class QCPBars;

namespace remat::gui {

class RanksPeakChart : public PlotView {
  Q_OBJECT
 public:
  explicit RanksPeakChart(QWidget* parent = nullptr);
  void setPeaks(const std::vector<RankPeak>& peaks);
  const std::vector<RankPeak>& peaks() const { return peaks_; }
  QCPBars* measuredBars() const { return measured_; }
  QCPBars* predictedBars() const { return predicted_; }  // null when no rank has a prediction
  void resetZoom() override;

 private:
  std::vector<RankPeak> peaks_;
  QCPBars* measured_ = nullptr;
  QCPBars* predicted_ = nullptr;
};

}  // namespace remat::gui
