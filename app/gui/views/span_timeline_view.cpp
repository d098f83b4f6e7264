#include "views/span_timeline_view.h"

#include <QMenu>
#include <QMouseEvent>
#include <QToolTip>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "theme.h"
#include "views/axis_tickers.h"
#include "views/span_plottable.h"

namespace remat::gui {

void set_lane_axes(QCustomPlot* plot) {
  plot->xAxis->setTicker(QSharedPointer<QCPAxisTicker>(new TimeTicker(plot->xAxis)));
  plot->xAxis->ticker()->setTickCount(8);
  plot->yAxis->grid()->setVisible(false);
  plot->yAxis->setSubTicks(false);
  plot->yAxis->setTickLength(0, 0);
  plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot->axisRect()->setRangeDrag(Qt::Horizontal);
  plot->axisRect()->setRangeZoom(Qt::Horizontal);
  plot->axisRect()->setAutoMargins(QCP::msTop | QCP::msBottom);
  plot->axisRect()->setMargins(QMargins(kTimeAxisLeftMargin, 0, kTimeAxisRightMargin, 0));
}

SpanTimelineView::SpanTimelineView(QWidget* parent) : PlotView(parent) {
  setTimeNavigation(true);
  bars_ = new SpanPlottable(plot_->xAxis, plot_->yAxis);
  bars_->setName(QString());
  bars_->removeFromLegend();
  set_lane_axes(plot_);
  plot_->yAxis->setRangeReversed(true);
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
  // The same tracks as before (another run of the same kind) keep their arrangement.
  if (labels != labels_ || order_.size() != static_cast<std::size_t>(labels.size())) {
    order_.resize(static_cast<std::size_t>(labels.size()));
    for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int>(i);
    pinned_.assign(order_.size(), 0);
    hidden_.assign(order_.size(), 0);
  }
  labels_ = labels;
  applyTracks();
  style_plot(plot_, palette());
  clamping_ = true;
  plot_->xAxis->setRange(dataTimeRange());
  clamping_ = false;
  plot_->replot();
}

std::vector<int> SpanTimelineView::shownTracks() const {
  std::vector<int> out;
  for (int pass = 0; pass < 2; ++pass)
    for (int r : order_)
      if (!hidden_[static_cast<std::size_t>(r)] && (pinned_[static_cast<std::size_t>(r)] != 0) == (pass == 0))
        out.push_back(r);
  return out;
}

QStringList SpanTimelineView::rowLabels() const {
  QStringList out;
  for (int r : shownTracks())
    out << (pinned_[static_cast<std::size_t>(r)] ? QStringLiteral("⚑ ") : QString()) + labels_.value(r);
  return out;
}

bool SpanTimelineView::trackPinned(int row) const {
  return row >= 0 && static_cast<std::size_t>(row) < pinned_.size() && pinned_[static_cast<std::size_t>(row)];
}

bool SpanTimelineView::trackHidden(int row) const {
  return row >= 0 && static_cast<std::size_t>(row) < hidden_.size() && hidden_[static_cast<std::size_t>(row)];
}

void SpanTimelineView::setTrackPinned(int row, bool on) {
  if (row < 0 || static_cast<std::size_t>(row) >= pinned_.size()) return;
  pinned_[static_cast<std::size_t>(row)] = on;
  applyTracks();
}

void SpanTimelineView::setTrackHidden(int row, bool on) {
  if (row < 0 || static_cast<std::size_t>(row) >= hidden_.size()) return;
  // The last shown track stays: a view with no rows says nothing.
  if (on && shownTracks().size() <= 1 && !hidden_[static_cast<std::size_t>(row)]) return;
  hidden_[static_cast<std::size_t>(row)] = on;
  applyTracks();
}

void SpanTimelineView::moveTrack(int row, int position) {
  const std::vector<int> shown = shownTracks();
  const auto from = std::find(shown.begin(), shown.end(), row);
  if (from == shown.end() || position < 0 || position >= static_cast<int>(shown.size())) return;
  const int target = shown[static_cast<std::size_t>(position)];
  if (target == row) return;
  // A track moved among the pinned ones is pinned, among the others unpinned.
  pinned_[static_cast<std::size_t>(row)] = pinned_[static_cast<std::size_t>(target)];
  const bool down = position > static_cast<int>(from - shown.begin());
  order_.erase(std::find(order_.begin(), order_.end(), row));
  auto at = std::find(order_.begin(), order_.end(), target);
  order_.insert(down ? at + 1 : at, row);
  applyTracks();
}

void SpanTimelineView::resetTracks() {
  for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int>(i);
  pinned_.assign(order_.size(), 0);
  hidden_.assign(order_.size(), 0);
  applyTracks();
}

void SpanTimelineView::applyTracks() {
  const std::vector<int> shown = shownTracks();
  bool identity = shown.size() == order_.size();
  for (std::size_t i = 0; identity && i < shown.size(); ++i) identity = shown[i] == static_cast<int>(i);
  bars_->setRowOrder(identity ? std::vector<int>{} : shown);
  label_stride_ = 0;
  const int n = static_cast<int>(shown.size());
  plot_->yAxis->setRange(-0.6, std::max(0, n - 1) + 0.6);
  updateRowLabels();
  plot_->replot();
}

int SpanTimelineView::trackAt(const QPoint& pos) const {
  const QRect ar = plot_->axisRect()->rect();
  if (pos.y() < ar.top() || pos.y() > ar.bottom() || pos.x() > ar.right()) return -1;
  const long p = std::lround(plot_->yAxis->pixelToCoord(pos.y()));
  return p >= 0 && p < bars_->shownRows() ? bars_->rowAtPosition(static_cast<int>(p)) : -1;
}

void SpanTimelineView::addMenuActions(QMenu& menu, const QPoint& pos) {
  const int row = trackAt(pos);
  if (row >= 0) {
    const QString name = labels_.value(row);
    const bool pinned = trackPinned(row);
    QAction* pin = menu.addAction(pinned ? tr("Unpin track “%1”").arg(name) : tr("Pin track “%1” on top").arg(name));
    connect(pin, &QAction::triggered, this, [this, row, pinned] { setTrackPinned(row, !pinned); });
    QAction* hide = menu.addAction(tr("Hide track “%1”").arg(name));
    hide->setEnabled(shownTracks().size() > 1);
    connect(hide, &QAction::triggered, this, [this, row] { setTrackHidden(row, true); });
    const std::vector<int> shown = shownTracks();
    const int at = static_cast<int>(std::find(shown.begin(), shown.end(), row) - shown.begin());
    QAction* up = menu.addAction(tr("Move track up"));
    up->setEnabled(at > 0);
    connect(up, &QAction::triggered, this, [this, row, at] { moveTrack(row, at - 1); });
    QAction* down = menu.addAction(tr("Move track down"));
    down->setEnabled(at + 1 < static_cast<int>(shown.size()));
    connect(down, &QAction::triggered, this, [this, row, at] { moveTrack(row, at + 1); });
  }
  std::vector<int> hidden;
  for (std::size_t r = 0; r < hidden_.size(); ++r)
    if (hidden_[r]) hidden.push_back(static_cast<int>(r));
  if (!hidden.empty()) {
    QMenu* show = menu.addMenu(tr("Show hidden track"));
    for (int r : hidden)
      connect(show->addAction(labels_.value(r)), &QAction::triggered, this, [this, r] { setTrackHidden(r, false); });
  }
  bool arranged = !hidden.empty();
  for (std::size_t i = 0; i < order_.size() && !arranged; ++i) arranged = pinned_[i] || order_[i] != static_cast<int>(i);
  if (arranged) connect(menu.addAction(tr("Reset tracks")), &QAction::triggered, this, &SpanTimelineView::resetTracks);
}

bool SpanTimelineView::eventFilter(QObject* o, QEvent* e) {
  // Dragging a track's label (left of the plot area) up or down moves the track.
  if (o == plot_ && (e->type() == QEvent::MouseButtonPress || e->type() == QEvent::MouseButtonRelease)) {
    auto* me = static_cast<QMouseEvent*>(e);
    const QPoint pos = me->position().toPoint();
    const bool on_labels = pos.x() < plot_->axisRect()->rect().left();
    if (e->type() == QEvent::MouseButtonPress && me->button() == Qt::LeftButton && on_labels) {
      drag_row_ = trackAt(QPoint(plot_->axisRect()->rect().left(), pos.y()));
      if (drag_row_ >= 0) plot_->setCursor(Qt::SizeVerCursor);
    } else if (e->type() == QEvent::MouseButtonRelease && drag_row_ >= 0) {
      const int target = trackAt(QPoint(plot_->axisRect()->rect().left(), pos.y()));
      const std::vector<int> shown = shownTracks();
      const auto at = std::find(shown.begin(), shown.end(), target);
      if (target >= 0 && at != shown.end()) moveTrack(drag_row_, static_cast<int>(at - shown.begin()));
      drag_row_ = -1;
      plot_->unsetCursor();
    }
  }
  return PlotView::eventFilter(o, e);
}

void SpanTimelineView::updateRowLabels() {
  const QStringList shown = rowLabels();
  const int n = shown.size();
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
    if (i % stride == 0) ticker->addTick(i, shown[i]);
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
