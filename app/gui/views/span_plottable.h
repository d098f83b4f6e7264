// A QCustomPlot plottable that draws rows of bars (ops and kernels per stream, schedule actions
// per block) from a SpanRows (times mapped as TimePlottable does): on every replot it asks core for the bars of the visible time
// range at the plot's pixel width (sub-pixel bars merged), so a million ops draw as fast as a
// thousand. Row r sits at value r; times are nanoseconds, drawn as (t - origin) * scale.
// A bar at least kEdgeMinPx wide leaves its last pixel column empty, so adjacent bars never
// merge into one; a bar wide enough shows its name (from the labeler), elided to fit.
#pragma once
#include <QVector>
#include <functional>
#include <memory>

#include "core/analysis/downsample.h"
#include "views/time_plottable.h"

namespace remat::gui {

class SpanPlottable : public TimePlottable {
 public:
  static constexpr int kEdgeMinPx = 3;
  // A bar as the last replot drew it, in pixels: [x0, x1) is the span's extent (rounded), the
  // fill stops one column short of x1 when the bar is at least kEdgeMinPx wide.
  struct DrawnBar {
    std::size_t row = 0;
    int x0 = 0, x1 = 0;
    bool clipped = false;  // cut at the plot's edge
    std::uint32_t index = 0, count = 1;
  };
  using Labeler = std::function<QString(std::size_t row, std::uint32_t index)>;

  SpanPlottable(QCPAxis* keyAxis, QCPAxis* valueAxis);

  void setRows(std::shared_ptr<const SpanRows> rows);
  const SpanRows* rows() const { return rows_.get(); }
  void setColors(QVector<QColor> colors) { colors_ = std::move(colors); }
  void setBarHeight(double h) { height_ = h; }  // in rows (0..1)
  void setLabeler(Labeler f) { labeler_ = std::move(f); }
  void setLabelFont(const QFont& f) { font_ = f; }
  // An outline around [start, end] on row `row` (row < 0: none), drawn at any zoom.
  void setHighlight(int row, std::int64_t start, std::int64_t end) {
    hl_row_ = row;
    hl_start_ = start;
    hl_end_ = end;
  }
  // Which rows are drawn, top to bottom... as values 0, 1, ...: order[p] is the row drawn at
  // value p (empty: every row at its own index). Rows left out are not drawn.
  void setRowOrder(std::vector<int> order) { order_ = std::move(order); }
  int shownRows() const;
  int rowAtPosition(int p) const;  // -1 outside
  int positionOf(int row) const;   // -1 when the row is not drawn
  // A shaded time range over every row (t1 < t0: none).
  void setTimeSelection(std::int64_t t0, std::int64_t t1) {
    sel_t0_ = t0;
    sel_t1_ = t1;
  }
  const std::vector<DrawnBar>& lastBars() const { return bars_; }

  // The span under a point in pixels, and its row; nullptr when none.
  const Span* spanAt(const QPointF& pos, int* row = nullptr) const;
  // Bars drawn by the last replot (for tests and benchmarks).
  std::size_t lastDrawn() const { return drawn_; }

  QCPRange getKeyRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth) const override;
  QCPRange getValueRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth,
                         const QCPRange& inKeyRange = QCPRange()) const override;

 protected:
  void draw(QCPPainter* painter) override;
  void drawLegendIcon(QCPPainter* painter, const QRectF& rect) const override;

 private:
  std::shared_ptr<const SpanRows> rows_;
  std::vector<int> order_;
  QVector<QColor> colors_;
  double height_ = 0.72;
  Labeler labeler_;
  QFont font_;
  int hl_row_ = -1;
  std::int64_t hl_start_ = 0, hl_end_ = 0;
  std::int64_t sel_t0_ = 0, sel_t1_ = -1;
  mutable std::size_t drawn_ = 0;
  std::vector<DrawnBar> bars_;
};

}  // namespace remat::gui
