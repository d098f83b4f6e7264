#include "views/compare_charts.h"

#include <algorithm>
#include <qcustomplot.h>

#include "core/analysis/run_compare.h"
#include "format.h"
#include "theme.h"
#include "views/axis_tickers.h"

namespace remat::gui {

namespace {

void add_title(QCustomPlot* p, const QString& title) {
  p->plotLayout()->insertRow(0);
  auto* t = new QCPTextElement(p, title, QFont(p->font().family(), -1, QFont::DemiBold));
  p->plotLayout()->addElement(0, 0, t);
  p->plotLayout()->setRowStretchFactor(0, 0.001);
}

}  // namespace

RunBarChart::RunBarChart(const QString& title, Unit unit, QWidget* parent) : PlotView(parent), unit_(unit) {
  add_title(plot_, title);
  if (unit_ == Unit::Bytes) plot_->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new BytesTicker));
  else plot_->yAxis->setLabel(tr("ms"));
  plot_->yAxis->ticker()->setTickCount(4);
  plot_->xAxis->grid()->setVisible(false);
  plot_->xAxis->setTickLength(0, 0);
  plot_->xAxis->setSubTicks(false);
  plot_->setMinimumHeight(180);
  style_plot(plot_, palette());
}

void RunBarChart::setBars(const QStringList& labels, const QVector<double>& values, const QVector<QColor>& colors,
                          const QStringList& notes) {
  plot_->clearPlottables();
  plot_->clearItems();
  count_ = static_cast<int>(values.size());
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  double top = 0;
  for (int i = 0; i < count_; ++i) {
    auto* bars = new QCPBars(plot_->xAxis, plot_->yAxis);
    bars->setWidth(0.62);
    bars->addData(i, values[i]);
    bars->setBrush(colors.value(i, Qt::gray));
    bars->setPen(QPen(colors.value(i, Qt::gray).darker(130)));
    bars->setName(labels.value(i));
    ticker->addTick(i, labels.value(i));
    top = std::max(top, values[i]);
    const QString v = unit_ == Unit::Bytes ? human_bytes(values[i]) : QString::number(values[i], 'f', 2) + " ms";
    auto* label = new QCPItemText(plot_);
    label->position->setCoords(i, values[i]);
    label->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
    label->setPadding(QMargins(0, 0, 0, 2));
    label->setText(notes.value(i).isEmpty() ? v : v + "\n" + notes.value(i));
    label->setColor(palette().color(QPalette::Text));
  }
  plot_->xAxis->setTicker(ticker);
  plot_->xAxis->setTickLabelRotation(count_ > 4 ? 25 : 0);
  plot_->xAxis->setRange(-0.6, std::max(0, count_ - 1) + 0.6);
  plot_->yAxis->setRange(0, top > 0 ? top * 1.3 : 1);
  style_plot(plot_, palette());
  plot_->replot();
}

void RunBarChart::resetZoom() { plot_->replot(); }

FrontierScatter::FrontierScatter(QWidget* parent) : PlotView(parent) {
  add_title(plot_, tr("Peak memory vs step time (frontier joined)"));
  plot_->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new BytesTicker));
  plot_->yAxis->ticker()->setTickCount(4);
  plot_->xAxis->setLabel(tr("median step time (ms)"));
  plot_->setMinimumHeight(180);
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  style_plot(plot_, palette());
}

void FrontierScatter::setRuns(const std::vector<RunEntry>& runs) {
  plot_->clearPlottables();
  plot_->clearItems();
  points_ = 0;
  std::vector<const Trace*> traces;
  for (const auto& r : runs) traces.push_back(r.trace.get());
  const auto rel = relate_runs(traces);
  std::vector<std::pair<double, double>> frontier;
  double xmax = 0, ymax = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Trace& t = *runs[i].trace;
    if (!t.complete) continue;
    const double x = t.median_step_ms(), y = static_cast<double>(t.peak_bytes);
    auto* g = plot_->addGraph();
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(QCPScatterStyle(rel[i].frontier ? QCPScatterStyle::ssDisc : QCPScatterStyle::ssCircle,
                                       run_color(runs[i].id), 9));
    g->addData(x, y);
    auto* label = new QCPItemText(plot_);
    label->position->setCoords(x, y);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
    label->setPadding(QMargins(7, 0, 0, 2));
    label->setText(QString("#%1 %2").arg(runs[i].id).arg(QString::fromStdString(t.policy)));
    label->setColor(palette().color(QPalette::Text));
    if (rel[i].frontier) frontier.push_back({x, y});
    xmax = std::max(xmax, x);
    ymax = std::max(ymax, y);
    ++points_;
  }
  std::sort(frontier.begin(), frontier.end());
  if (frontier.size() > 1) {
    auto* g = plot_->addGraph();
    QColor c = palette().color(QPalette::Text);
    c.setAlpha(120);
    g->setPen(QPen(c, 1.2, Qt::DashLine));
    for (const auto& [x, y] : frontier) g->addData(x, y);
  }
  plot_->xAxis->setRange(0, xmax > 0 ? xmax * 1.4 : 1);
  plot_->yAxis->setRange(0, ymax > 0 ? ymax * 1.2 : 1);
  style_plot(plot_, palette());
  plot_->replot();
}

void FrontierScatter::resetZoom() {
  plot_->rescaleAxes();
  plot_->xAxis->setRangeLower(0);
  plot_->yAxis->setRangeLower(0);
  plot_->replot();
}

}  // namespace remat::gui
