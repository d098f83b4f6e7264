// The op timelines of every rank of a run of several ranks, stacked on one time axis: each rank
// a lane of two rows, its ops ("rank N") and its collectives ("N comm"), colored by phase (the
// collectives in their own color), aligned at the start of each rank's last counted step
// (core/analysis/rank_lanes.h), with arrows from each collective to its partners on the other
// ranks (views/flow_plottable.h).
#pragma once
#include <memory>
#include <vector>

#include "core/analysis/collective_links.h"
#include "core/analysis/rank_lanes.h"
#include "views/span_timeline_view.h"

namespace remat::gui {

class FlowPlottable;

class RanksTimelineView : public SpanTimelineView {
  Q_OBJECT
 public:
  explicit RanksTimelineView(QWidget* parent = nullptr);
  // The ranks in rank order (null: a rank that left no run). The traces must outlive the view's
  // use of them (kept here).
  void setRanks(std::vector<std::shared_ptr<const Trace>> ranks);
  const RankLanes& lanes() const { return *lanes_; }
  static QColor commColor();  // the collectives' bars
  FlowPlottable* flows() const { return flows_; }
  const CollectiveLinks& links() const { return *links_; }
  void setFlowsShown(bool on);
  // Where rank `rank`'s row of collectives is drawn (a value of the plot), -1 when it is not.
  int commPosition(int rank) const;

 protected:
  QString describe(const Span& s, int row) const override;

 private:
  std::vector<std::shared_ptr<const Trace>> ranks_;
  std::vector<const Trace*> raw_;
  std::shared_ptr<const RankLanes> lanes_;
  std::shared_ptr<const CollectiveLinks> links_;
  std::vector<int> comm_row_;  // per rank, its row of collectives (-1: none)
  FlowPlottable* flows_;
};

}  // namespace remat::gui
