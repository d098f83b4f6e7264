#include "views/span_timeline_view.h"

#include <QMouseEvent>
#include <QToolTip>
#include <cmath>
#include <qcustomplot.h>

#include "theme.h"
#include "views/axis_tickers.h"
#include "views/span_plottable.h"

namespace remat::gui {

namespace {
constexpr int kLeftMargin = 84, kRightMargin = 18;
}

SpanTimelineView::SpanTimelineView(QWidget* parent) : PlotView(parent) {
  setTimeNavigation(true);
  bars_ = new SpanPlottable(plot_->xAxis, plot_->yAxis);
  bars_->setName(QString());
  bars_->removeFromLegend();
  plot_->xAxis->setTicker(QSharedPointer<QCPAxisTicker>(new TimeTicker(plot_->xAxis)));
  plot_->xAxis->ticker()->setTickCount(8);
  plot_->yAxis->setRangeReversed(true);
  plot_->yAxis->grid()->setVisible(false);
  plot_->yAxis->setSubTicks(false);
  plot_->yAxis->setTickLength(0, 0);
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot_->axisRect()->setRangeDrag(Qt::Horizontal);
  plot_->axisRect()->setRangeZoom(Qt::Horizontal);
  plot_->axisRect()->setAutoMargins(QCP::msTop | QCP::msBottom);
  plot_->axisRect()->setMargins(QMargins(kLeftMargin, 0, kRightMargin, 0));
  plot_->legend->setVisible(true);
  plot_->axisRect()->insetLayout()->take(plot_->legend);
  plot_->legend->setFillOrder(QCPLegend::foColumnsFirst);
  plot_->legend->setWrap(8);
  plot_->legend->setIconSize(14, 10);
  plot_->legend->setColumnSpacing(10);
  plot_->legend->setRowSpacing(0);
  plot_->legend->setMargins(QMargins(4, 1, 4, 1));
  QFont lf = font();
  lf.setPointSizeF(lf.pointSizeF() * 0.9);
  plot_->legend->setFont(lf);
  plot_->plotLayout()->insertRow(0);
  plot_->plotLayout()->addElement(0, 0, plot_->legend);
  plot_->plotLayout()->setRowStretchFactor(0, 0.001);
  plot_->plotLayout()->setRowSpacing(0);
  connect(plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          [this](const QCPRange& r) { clampRange(r); });
  connect(plot_, &QCustomPlot::mouseMove, this, &SpanTimelineView::onMouseMove);
  // The rows' height is known once laid out: thin the labels then if they would overlap.
  connect(plot_, &QCustomPlot::afterReplot, this, [this] {
    const int before = label_stride_;
    const QFont font_before = plot_->yAxis->tickLabelFont();
    updateRowLabels();
    if (label_stride_ != before || font_before != plot_->yAxis->tickLabelFont()) plot_->replot(QCustomPlot::rpQueuedReplot);
  });
  style_plot(plot_, palette());
}

void SpanTimelineView::setTimeAxis(std::int64_t origin, std::int64_t duration) {
  origin_ = origin;
  duration_ = std::max<std::int64_t>(1, duration);
  bars_->setTimeMapping(origin_, 1.0);
}

std::size_t SpanTimelineView::drawnBars() const { return bars_->lastDrawn(); }

QCPRange SpanTimelineView::dataTimeRange() const {
  return QCPRange(0, static_cast<double>(duration_));
}

void SpanTimelineView::resetZoom() {
  plot_->xAxis->setRange(dataTimeRange());
  plot_->replot();
}

void SpanTimelineView::setRows(std::shared_ptr<const SpanRows> rows, const QStringList& labels,
                               QVector<QColor> colors, const QStringList& legend_names,
                               const QVector<QColor>& legend_colors) {
  bars_->setRows(std::move(rows));
  bars_->setColors(std::move(colors));
  plot_->clearGraphs();
  for (int i = 0; i < legend_names.size(); ++i) {
    QCPGraph* g = plot_->addGraph();
    g->setName(legend_names[i]);
    g->setPen(Qt::NoPen);
    g->setBrush(legend_colors[i]);
  }
  labels_ = labels;
  label_stride_ = 0;
  const int n = labels.size();
  plot_->yAxis->setRange(-0.6, std::max(0, n - 1) + 0.6);
  updateRowLabels();
  style_plot(plot_, palette());
  clamping_ = true;
  plot_->xAxis->setRange(dataTimeRange());
  clamping_ = false;
  plot_->replot();
}

void SpanTimelineView::updateRowLabels() {
  const int n = labels_.size();
  const int h = plot_->axisRect()->height() > 0 ? plot_->axisRect()->height() : plot_->height();
  const double per_row = n > 0 ? static_cast<double>(std::max(h, 1)) / (n + 0.2) : 1e9;
  // The labels shrink down to 70 % of the font before only every k-th row keeps one.
  QFont f = font();
  const int full = QFontMetrics(f).height();
  if (full > per_row && f.pointSizeF() > 0) f.setPointSizeF(f.pointSizeF() * std::max(0.7, per_row / full));
  const int need = QFontMetrics(f).height();
  const int stride = std::max(1, static_cast<int>(std::ceil(need / std::max(per_row, 1.0))));
  if (stride == label_stride_ && f == plot_->yAxis->tickLabelFont()) return;
  label_stride_ = stride;
  plot_->yAxis->setTickLabelFont(f);
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (int i = 0; i < n; ++i)
    if (i % stride == 0) ticker->addTick(i, labels_[i]);
  plot_->yAxis->setTicker(ticker);
}

void SpanTimelineView::clampRange(const QCPRange& r) {
  if (clamping_) return;
  const QCPRange d = dataTimeRange();
  QCPRange n = r;
  if (n.size() > d.size()) n = d;
  if (n.size() < 50) n = QCPRange(n.center() - 25, n.center() + 25);
  if (n.lower < d.lower) n = QCPRange(d.lower, d.lower + n.size());
  if (n.upper > d.upper) n = QCPRange(d.upper - n.size(), d.upper);
  if (n.lower != r.lower || n.upper != r.upper) {
    clamping_ = true;
    plot_->xAxis->setRange(n);
    clamping_ = false;
  }
}

void SpanTimelineView::onMouseMove(QMouseEvent* e) {
  if (e->buttons() != Qt::NoButton) return;
  int row = -1;
  const Span* s = bars_->spanAt(e->position(), &row);
  if (!s) {
    QToolTip::hideText();
    return;
  }
  QToolTip::showText(e->globalPosition().toPoint() + QPoint(14, 10), describe(*s, row), plot_);
}

}  // namespace remat::gui
