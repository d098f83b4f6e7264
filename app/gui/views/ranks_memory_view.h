// The Ranks page's memory lanes: each rank's device bytes over its last counted step, a lane per
// rank (rank 0 on top) on one byte scale (the highest rank's peak fills its lane), aligned like
// the op lanes at the start of each rank's step, so which rank peaks when reads off at a glance.
// The lanes are labelled with the rank and its peak; hovering says the bytes.
#pragma once
#include <memory>
#include <vector>

#include "core/trace/trace.h"
#include "views/plot_view.h"

class QCPGraph;

namespace remat::gui {

class RanksMemoryView : public PlotView {
  Q_OBJECT
 public:
  explicit RanksMemoryView(QWidget* parent = nullptr);
  // The ranks in rank order (null: a rank that left no run: an empty lane).
  void setRanks(const std::vector<std::shared_ptr<const Trace>>& ranks);
  void resetZoom() override;
  int lanes() const { return static_cast<int>(graphs_.size()); }
  QCPGraph* lane(int rank) const;  // null for a rank without a run
  // The value the lane of `rank` has at `bytes` (its base at 0 bytes).
  double laneValue(int rank, double bytes) const;
  std::uint64_t scaleBytes() const { return scale_; }  // what fills a lane: the highest peak

 private:
  void onMouseMove(QMouseEvent* e);

  std::vector<std::shared_ptr<const Trace>> ranks_;
  std::vector<QCPGraph*> graphs_;
  std::uint64_t scale_ = 1;
  std::int64_t duration_ = 1;
};

}  // namespace remat::gui
