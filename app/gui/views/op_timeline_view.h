// The op / kernel timeline of a run's last counted step as a track view: on the compute stream
// the nested levels step > phase > block > op > kernel (core/analysis/slice_tree.h; kernels on
// CUDA runs only), then one track per other stream (copies to and from the host, host work).
// Slices are colored by phase, keep their own edges and show their names where they fit;
// sub-pixel slices are merged in core per zoom step. A click selects a slice (sliceSelected),
// Shift+drag selects a time range (rangeSelected), and find() / next() / previous() walk the
// ops whose name matches, highlighting each and bringing it into view.
#pragma once
#include <QString>
#include <memory>
#include <optional>

#include "core/analysis/slice_tree.h"
#include "core/trace/trace.h"
#include "views/run_view_data.h"
#include "views/span_timeline_view.h"

namespace remat::gui {

class OpTimelineView : public SpanTimelineView {
  Q_OBJECT
 public:
  explicit OpTimelineView(QWidget* parent = nullptr);
  // Times are drawn relative to `origin` (the memory timeline's), `duration` long.
  void setTrace(std::shared_ptr<const Trace> t, std::int64_t origin, std::int64_t duration);
  // ... with its slice levels and rows built before (run_view_data.h).
  void setData(std::shared_ptr<const Trace> t, std::shared_ptr<const SliceViewData> d, std::int64_t origin,
               std::int64_t duration);
  const Trace* trace() const { return trace_.get(); }
  const SliceTree& tree() const { return *tree_; }

  // The slice under a point of the plot (pixels): {track, slice}, or {-1, -1}.
  std::pair<int, int> sliceAt(const QPointF& pos) const;
  void selectSlice(int track, int slice);
  // The selected time range, else the clicked slice (x-axis coordinates).
  std::optional<std::pair<double, double>> selection() const override;
  std::pair<int, int> selectedSlice() const { return selected_; }
  // The details of a slice (HTML): level, name, op, block, phase, step, ops, FLOPs, bytes, time,
  // and the memory its ops allocated and freed.
  QString sliceDetails(int track, int slice) const;

  // Ops (any stream) whose name or op type holds `text`, ignoring case, by start time; returns
  // how many. The current match is none until next() / previous().
  int find(const QString& text);
  int matchCount() const { return static_cast<int>(matches_.size()); }
  int currentMatch() const { return current_; }  // 0-based, -1: none
  std::uint32_t matchOp(int k) const { return matches_[static_cast<std::size_t>(k)]; }
  void next();
  void previous();

  // A time range on the run's clock [t0, t1] (ns); t1 < t0 clears it.
  void selectTimeRange(std::int64_t t0, std::int64_t t1);
  std::pair<std::int64_t, std::int64_t> timeRange() const { return {range_t0_, range_t1_}; }
  // Pans (and zooms in when it is narrower than a few pixels) so [start, end] is in view.
  void showTime(std::int64_t start, std::int64_t end);
  // Zooms so the compute ops [first, first + n) (in time order) fill the view.
  void zoomToComputeOps(std::size_t first, std::size_t n);
  // A PNG of the view and, next to it (<path>.json), where the plot area and the leaf row are
  // in its pixels and the edges of each leaf slice drawn on its own, for checks of the image.
  bool saveScreenshot(const QString& path, QString* error) const;

 signals:
  void sliceSelected(int track, int slice);
  void rangeSelected(qint64 t0, qint64 t1);
  void matchChanged(int current, int count);

 protected:
  QString describe(const Span& s, int row) const override;

 private:
  void gotoMatch(int k);
  void onPress(QMouseEvent* e);
  void onRelease(QMouseEvent* e);

  std::shared_ptr<const Trace> trace_;
  std::shared_ptr<const SliceViewData> data_;  // never null
  const SliceTree* tree_;                      // data_'s
  mutable std::unique_ptr<OpMemoryIndex> memory_;  // built on the first details asked for
  std::pair<int, int> selected_{-1, -1};
  std::vector<std::uint32_t> matches_;
  int current_ = -1;
  std::int64_t range_t0_ = 0, range_t1_ = -1;
  QPointF press_;
  bool shift_drag_ = false;
};

}  // namespace remat::gui
