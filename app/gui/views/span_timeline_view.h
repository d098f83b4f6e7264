// Base of the views that draw rows of bars over the step's time axis (the op / kernel timeline
// and the schedule strip): horizontal zoom and pan with the mouse, clamped to the data, row
// labels on the left, a legend of the color classes, and a tooltip for the bar under the mouse.
#pragma once
#include <QStringList>
#include <QVector>
#include <memory>
#include <vector>

#include "core/analysis/downsample.h"
#include "views/plot_view.h"

class QCPRange;
class QMouseEvent;

namespace remat::gui {

class SpanPlottable;

// The axes of a view of lanes over a step's time axis: time labels fitted to the width, the
// lanes without grid or ticks, dragged and zoomed along time only, the shared margins.
void set_lane_axes(QCustomPlot* plot);

class SpanTimelineView : public PlotView {
  Q_OBJECT
 public:
  explicit SpanTimelineView(QWidget* parent = nullptr);

  // The time axis: x = (t_ns - origin) in ns; `duration` is the step's length.
  void setTimeAxis(std::int64_t origin, std::int64_t duration);
  QCPRange dataTimeRange() const;
  std::int64_t timeOrigin() const { return origin_; }
  void resetZoom() override;
  SpanPlottable* bars() const { return bars_; }
  // The row labels as drawn, top to bottom (a pinned track's marked "⚑ ").
  QStringList rowLabels() const;

  // The tracks (rows) as the user arranges them: pinned tracks first, then the others, each in
  // the order given by moves; hidden tracks not drawn. By the right-click menu over a track, or
  // by dragging its label up or down. Rows are the data's (setRows) indices.
  std::vector<int> shownTracks() const;  // top to bottom
  void setTrackPinned(int row, bool on);
  void setTrackHidden(int row, bool on);
  void moveTrack(int row, int position);  // to that place among the shown tracks
  void resetTracks();
  bool trackPinned(int row) const;
  bool trackHidden(int row) const;
  // The track under a point of the plot (pixels), over its bars or its label; -1 for none.
  int trackAt(const QPoint& pos) const;
  // Bars drawn by the last replot.
  std::size_t drawnBars() const;

 protected:
  void setRows(std::shared_ptr<const SpanRows> rows, const QStringList& labels, QVector<QColor> colors,
               const QStringList& legend_names, const QVector<QColor>& legend_colors);
  // The tooltip for a bar of row `row` (its Span::index names the record).
  virtual QString describe(const Span& s, int row) const = 0;
  void addMenuActions(QMenu& menu, const QPoint& pos) override;
  bool eventFilter(QObject* o, QEvent* e) override;

 private:
  void clampRange(const QCPRange& r);
  void onMouseMove(QMouseEvent* e);
  // Row labels in a font shrunk to fit the rows (down to 70 %), every k-th when the rows are
  // still too close for each to have one.
  void updateRowLabels();

  void applyTracks();  // the order, pins and hidden rows to the bars and the labels

  QStringList labels_;
  int label_stride_ = 0;
  std::vector<int> order_;        // every row, in the user's order (pins taken first when drawn)
  std::vector<char> pinned_, hidden_;
  int drag_row_ = -1;             // the track whose label is being dragged

  SpanPlottable* bars_;
  std::int64_t origin_ = 0, duration_ = 1;
  bool clamping_ = false;
};

}  // namespace remat::gui
