#include "views/compare_overlay.h"

#include <map>
#include <qcustomplot.h>

#include "core/analysis/downsample.h"
#include "core/analysis/memory_timeline.h"
#include "theme.h"
#include "views/axis_tickers.h"

namespace remat::gui {

OverlayTimelineView::OverlayTimelineView(QWidget* parent) : PlotView(parent) {
  setTimeNavigation(true);
  plot_->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new BytesTicker));
  plot_->yAxis->setLabel(tr("device bytes"));
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot_->axisRect()->setRangeDrag(Qt::Horizontal);
  plot_->axisRect()->setRangeZoom(Qt::Horizontal);
  plot_->legend->setVisible(true);
  plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  connect(plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, [this](const QCPRange& r) {
    clampRange(r);
    updateVisible();
  });
}

void OverlayTimelineView::setRuns(const std::vector<RunEntry>& runs, TimeMode mode) {
  plot_->clearGraphs();
  series_.clear();
  extent_ = 1;
  ymax_ = 1;
  plot_->xAxis->setTicker(mode == TimeMode::Absolute ? QSharedPointer<QCPAxisTicker>(new TimeTicker(plot_->xAxis))
                                                     : QSharedPointer<QCPAxisTicker>(new FractionTicker));
  plot_->xAxis->setLabel(mode == TimeMode::Absolute ? tr("time in the step") : tr("fraction of the step"));
  std::map<std::string, int> seen;
  for (const RunEntry& r : runs) {
    const MemoryTimeline tl = memory_timeline(*r.trace);
    Series s;
    const std::int64_t origin = tl.range.start_ns;
    const double dur = static_cast<double>(std::max<std::int64_t>(1, tl.range.end_ns - tl.range.start_ns));
    const double scale = mode == TimeMode::Absolute ? 1.0 : 1.0 / dur;
    s.x.reserve(tl.points.size());
    s.y.reserve(tl.points.size());
    for (const auto& p : tl.points) {
      s.x.push_back(static_cast<double>(p.t_ns - origin) * scale);
      s.y.push_back(static_cast<double>(p.device));
    }
    extent_ = std::max(extent_, mode == TimeMode::Absolute ? dur : 1.0);
    ymax_ = std::max(ymax_, static_cast<double>(tl.peak_device));
    QCPGraph* g = plot_->addGraph();
    g->setName(r.label);
    g->setLineStyle(QCPGraph::lsStepLeft);
    // The policy's color; a second run of the same policy dashed, a third dotted.
    const int repeat = seen[r.trace->policy]++;
    g->setPen(QPen(policy_color(r.trace->policy), 1.8,
                   repeat == 0 ? Qt::SolidLine : repeat == 1 ? Qt::DashLine : Qt::DotLine));
    series_.push_back(std::move(s));
  }
  style_plot(plot_, palette());
  plot_->yAxis->setRange(0, ymax_ * 1.12);
  clamping_ = true;
  plot_->xAxis->setRange(dataTimeRange());
  clamping_ = false;
  updateVisible();
  plot_->replot();
}

QCPRange OverlayTimelineView::dataTimeRange() const { return QCPRange(0, extent_); }

void OverlayTimelineView::resetZoom() {
  plot_->xAxis->setRange(dataTimeRange());
  plot_->replot();
}

double OverlayTimelineView::plottedMaximum(int line) const {
  double m = 0;
  if (line < 0 || line >= plot_->graphCount()) return m;
  auto d = plot_->graph(line)->data();
  for (auto it = d->constBegin(); it != d->constEnd(); ++it) m = std::max(m, it->value);
  return m;
}

void OverlayTimelineView::clampRange(const QCPRange& r) {
  if (clamping_) return;
  const QCPRange d = dataTimeRange();
  QCPRange n = r;
  if (n.size() > d.size()) n = d;
  if (n.lower < d.lower) n = QCPRange(d.lower, d.lower + n.size());
  if (n.upper > d.upper) n = QCPRange(d.upper - n.size(), d.upper);
  if (n.lower != r.lower || n.upper != r.upper) {
    clamping_ = true;
    plot_->xAxis->setRange(n);
    clamping_ = false;
  }
}

void OverlayTimelineView::updateVisible() {
  const QCPRange r = plot_->xAxis->range();
  const std::size_t width = static_cast<std::size_t>(std::max(200, plot_->width()));
  for (std::size_t i = 0; i < series_.size() && static_cast<int>(i) < plot_->graphCount(); ++i) {
    const Series& s = series_[i];
    const auto idx = downsample_indices(s.x, s.y, r.lower, r.upper, width);
    QVector<double> k(static_cast<int>(idx.size())), v(static_cast<int>(idx.size()));
    for (std::size_t j = 0; j < idx.size(); ++j) {
      k[static_cast<int>(j)] = s.x[idx[j]];
      v[static_cast<int>(j)] = s.y[idx[j]];
    }
    plot_->graph(static_cast<int>(i))->setData(k, v, true);
  }
}

}  // namespace remat::gui
