// A QCustomPlot plottable that draws rows of bars (ops and kernels per stream, schedule actions
// per block) from a SpanRows: on every replot it asks core for the bars of the visible time
// range at the plot's pixel width (sub-pixel bars merged), so a million ops draw as fast as a
// thousand. Row r sits at value r; times are nanoseconds, drawn as (t - origin) * scale.
#pragma once
#include <QVector>
#include <memory>
#include <qcustomplot.h>

#include "core/analysis/downsample.h"

namespace remat::gui {

class SpanPlottable : public QCPAbstractPlottable {
 public:
  SpanPlottable(QCPAxis* keyAxis, QCPAxis* valueAxis);

  void setRows(std::shared_ptr<const SpanRows> rows);
  const SpanRows* rows() const { return rows_.get(); }
  void setColors(QVector<QColor> colors) { colors_ = std::move(colors); }
  // x = (t_ns - origin) * scale
  void setTimeMapping(std::int64_t origin, double scale) {
    origin_ = origin;
    scale_ = scale;
  }
  void setBarHeight(double h) { height_ = h; }  // in rows (0..1)

  // The span under a point in pixels, and its row; nullptr when none.
  const Span* spanAt(const QPointF& pos, int* row = nullptr) const;
  // Bars drawn by the last replot (for tests and benchmarks).
  std::size_t lastDrawn() const { return drawn_; }

  double selectTest(const QPointF& pos, bool onlySelectable, QVariant* details = nullptr) const override;
  QCPRange getKeyRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth) const override;
  QCPRange getValueRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth,
                         const QCPRange& inKeyRange = QCPRange()) const override;

 protected:
  void draw(QCPPainter* painter) override;
  void drawLegendIcon(QCPPainter* painter, const QRectF& rect) const override;

 private:
  double toKey(std::int64_t t) const { return static_cast<double>(t - origin_) * scale_; }
  std::int64_t toTime(double key) const { return origin_ + static_cast<std::int64_t>(key / scale_); }

  std::shared_ptr<const SpanRows> rows_;
  QVector<QColor> colors_;
  std::int64_t origin_ = 0;
  double scale_ = 1.0;
  double height_ = 0.72;
  mutable std::size_t drawn_ = 0;
};

}  // namespace remat::gui
