#include "views/ranks_peak_chart.h"

#include <qcustomplot.h>

#include "format.h"
#include "theme.h"
#include "views/axis_tickers.h"

namespace remat::gui {

RanksPeakChart::RanksPeakChart(QWidget* parent) : PlotView(parent) {
  plot_->setMinimumHeight(180);
  plot_->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new BytesTicker));
  plot_->yAxis->setLabel(tr("peak memory per rank"));
  plot_->xAxis->grid()->setVisible(false);
  // The legend in a row of its own above the plot, never over a bar.
  plot_->legend->setVisible(true);
  plot_->axisRect()->insetLayout()->take(plot_->legend);
  plot_->legend->setFillOrder(QCPLegend::foColumnsFirst);
  plot_->legend->setIconSize(14, 10);
  plot_->legend->setColumnSpacing(12);
  plot_->legend->setMargins(QMargins(4, 1, 4, 1));
  plot_->legend->setBorderPen(Qt::NoPen);
  plot_->plotLayout()->insertRow(0);
  plot_->plotLayout()->addElement(0, 0, plot_->legend);
  plot_->plotLayout()->setRowStretchFactor(0, 0.001);
  plot_->plotLayout()->setRowSpacing(0);
}

void RanksPeakChart::setPeaks(const std::vector<RankPeak>& peaks) {
  peaks_ = peaks;
  plot_->clearPlottables();
  measured_ = predicted_ = nullptr;
  bool any_predicted = false;
  for (const auto& p : peaks_) any_predicted = any_predicted || p.predicted > 0;
  auto* group = new QCPBarsGroup(plot_);
  group->setSpacing(2);
  const QColor m(0x2e, 0x86, 0xc1), pr(0xe6, 0x7e, 0x22);
  measured_ = new QCPBars(plot_->xAxis, plot_->yAxis);
  measured_->setName(tr("measured"));
  measured_->setBrush(m);
  measured_->setPen(QPen(m.darker(130)));
  measured_->setWidth(any_predicted ? 0.36 : 0.6);
  measured_->setBarsGroup(group);
  if (any_predicted) {
    predicted_ = new QCPBars(plot_->xAxis, plot_->yAxis);
    predicted_->setName(tr("predicted"));
    predicted_->setBrush(QBrush(pr, Qt::Dense4Pattern));
    predicted_->setPen(QPen(pr.darker(130)));
    predicted_->setWidth(0.36);
    predicted_->setBarsGroup(group);
  }
  QSharedPointer<QCPAxisTickerText> ticks(new QCPAxisTickerText);
  for (const auto& p : peaks_) {
    const double x = p.rank;
    measured_->addData(x, static_cast<double>(p.measured));
    if (predicted_) predicted_->addData(x, static_cast<double>(p.predicted));
    QString label = p.complete ? tr("rank %1").arg(p.rank) : tr("rank %1 (incomplete)").arg(p.rank);
    label += "\n" + human_bytes(static_cast<double>(p.measured));
    if (p.predicted > 0) label += tr(" (predicted %1)").arg(human_bytes(static_cast<double>(p.predicted)));
    ticks->addTick(x, label);
  }
  plot_->xAxis->setTicker(ticks);
  resetZoom();
}

void RanksPeakChart::resetZoom() {
  double top = 1;
  for (const auto& p : peaks_) top = std::max({top, static_cast<double>(p.measured), static_cast<double>(p.predicted)});
  plot_->xAxis->setRange(-0.6, static_cast<double>(std::max<std::size_t>(peaks_.size(), 1)) - 0.4);
  plot_->yAxis->setRange(0, top * 1.15);
  plot_->replot();
}

}  // namespace remat::gui
