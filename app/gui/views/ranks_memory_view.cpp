#include "views/ranks_memory_view.h"

#include <QMouseEvent>
#include <QToolTip>
#include <algorithm>
#include <qcustomplot.h>

#include "core/analysis/memory_timeline.h"
#include "format.h"
#include "theme.h"
#include "views/span_timeline_view.h"

namespace remat::gui {

namespace {
constexpr double kLaneFill = 0.85;  // of a lane's height, at the scale's bytes
}  // namespace

RanksMemoryView::RanksMemoryView(QWidget* parent) : PlotView(parent) {
  setTimeNavigation(true);
  plot_->setMinimumHeight(120);
  set_lane_axes(plot_);  // as the op lanes under it, so the time axes line up
  plot_->xAxis->setTickLabels(false);
  plot_->yAxis->setLabel(tr("device bytes"));
  plot_->setMouseTracking(true);
  connect(plot_, &QCustomPlot::mouseMove, this, &RanksMemoryView::onMouseMove);
}

double RanksMemoryView::laneValue(int rank, double bytes) const {
  const int n = lanes();
  const double base = static_cast<double>(n - 1 - rank) - kLaneFill / 2;
  return base + kLaneFill * bytes / static_cast<double>(std::max<std::uint64_t>(scale_, 1));
}

QCPGraph* RanksMemoryView::lane(int rank) const {
  return rank >= 0 && rank < lanes() ? graphs_[static_cast<std::size_t>(rank)] : nullptr;
}

void RanksMemoryView::setRanks(const std::vector<std::shared_ptr<const Trace>>& ranks) {
  ranks_ = ranks;
  plot_->clearGraphs();
  graphs_.assign(ranks_.size(), nullptr);
  scale_ = 1;
  duration_ = 1;
  for (const auto& t : ranks_)
    if (t) {
      scale_ = std::max<std::uint64_t>(scale_, t->peak_bytes);
      duration_ = std::max<std::int64_t>(duration_, t->step_end_ns - t->step_start_ns);
    }
  const int n = static_cast<int>(ranks_.size());
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (int r = 0; r < n; ++r) {
    const auto& t = ranks_[static_cast<std::size_t>(r)];
    ticker->addTick(n - 1 - r, t ? tr("rank %1\n%2").arg(r).arg(human_bytes(static_cast<double>(t->peak_bytes)))
                                 : tr("rank %1\nno run").arg(r));
    if (!t) continue;
    const MemoryTimeline mt = memory_timeline(*t);
    QVector<double> x, y, base_x, base_y;
    x.reserve(static_cast<qsizetype>(mt.points.size()));
    y.reserve(static_cast<qsizetype>(mt.points.size()));
    for (const TimelinePoint& p : mt.points) {
      x << static_cast<double>(p.t_ns - t->step_start_ns);
      y << laneValue(r, static_cast<double>(p.device));
    }
    QCPGraph* base = plot_->addGraph();
    base->setPen(Qt::NoPen);
    base->removeFromLegend();
    if (!x.isEmpty()) base->setData({x.front(), x.back()}, {laneValue(r, 0), laneValue(r, 0)}, true);
    QCPGraph* g = plot_->addGraph();
    g->removeFromLegend();
    g->setLineStyle(QCPGraph::lsStepLeft);
    g->setData(x, y, true);
    const QColor c = QColor::fromHsv((200 + 47 * r) % 360, 140, 190);
    g->setPen(QPen(c.darker(130), 1));
    QColor fill = c;
    fill.setAlpha(150);
    g->setBrush(fill);
    g->setChannelFillGraph(base);
    graphs_[static_cast<std::size_t>(r)] = g;
  }
  plot_->yAxis->setTicker(ticker);
  plot_->yAxis->setRange(-0.55, std::max(0, n - 1) + 0.55);
  style_plot(plot_, palette());
  resetZoom();
}

void RanksMemoryView::resetZoom() {
  plot_->xAxis->setRange(0, static_cast<double>(duration_));
  plot_->replot();
}

void RanksMemoryView::onMouseMove(QMouseEvent* e) {
  const int n = lanes();
  if (n == 0 || !plot_->axisRect()->rect().contains(e->position().toPoint())) {
    QToolTip::hideText();
    return;
  }
  const long p = std::lround(plot_->yAxis->pixelToCoord(e->position().y()));
  const int rank = n - 1 - static_cast<int>(p);
  QCPGraph* g = lane(rank);
  if (!g || g->data()->isEmpty()) {
    QToolTip::hideText();
    return;
  }
  const double key = plot_->xAxis->pixelToCoord(e->position().x());
  auto it = g->data()->findEnd(key, false);  // the step in force at `key`
  if (it != g->data()->constBegin()) --it;
  const double bytes = (it->value - laneValue(rank, 0)) / kLaneFill * static_cast<double>(scale_);
  QToolTip::showText(e->globalPosition().toPoint() + QPoint(14, 10),
                     tr("rank %1 at %2: %3").arg(rank).arg(human_time_ns(key), human_bytes(std::max(0.0, bytes))), plot_);
}

}  // namespace remat::gui
