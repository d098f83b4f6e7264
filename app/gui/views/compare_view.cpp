#include "views/compare_view.h"

#include <QButtonGroup>
#include <QHBoxLayout>
#include <QLabel>
#include <QRadioButton>
#include <QScrollArea>
#include <QSplitter>
#include <QStackedWidget>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "core/analysis/run_compare.h"
#include "format.h"
#include "theme.h"
#include "views/compare_charts.h"
#include "views/compare_overlay.h"

namespace remat::gui {

CompareView::CompareView(QWidget* parent)
    : QWidget(parent),
      hint_(new QLabel(this)),
      absolute_(new QRadioButton(tr("&Absolute time"), this)),
      normalized_(new QRadioButton(tr("&Normalized to step time"), this)),
      stacked_(new QRadioButton(tr("&Stacked"), this)),
      overlaid_(new QRadioButton(tr("&Overlaid"), this)),
      pages_(new QStackedWidget(this)),
      stack_box_(new QWidget),
      stack_layout_(new QVBoxLayout(stack_box_)),
      overlay_(new OverlayTimelineView(this)),
      peak_(new RunBarChart(tr("Peak memory (reduction against none)"), RunBarChart::Unit::Bytes, this)),
      time_(new RunBarChart(tr("Median step time (overhead against none)"), RunBarChart::Unit::Milliseconds, this)),
      scatter_(new FrontierScatter(this)) {
  auto* g1 = new QButtonGroup(this);
  g1->addButton(absolute_);
  g1->addButton(normalized_);
  auto* g2 = new QButtonGroup(this);
  g2->addButton(stacked_);
  g2->addButton(overlaid_);
  absolute_->setChecked(true);
  stacked_->setChecked(true);
  auto* bar = new QHBoxLayout;
  bar->addWidget(hint_, 1);
  bar->addWidget(absolute_);
  bar->addWidget(normalized_);
  bar->addSpacing(18);
  bar->addWidget(stacked_);
  bar->addWidget(overlaid_);
  hint_->setWordWrap(true);

  stack_layout_->setContentsMargins(0, 0, 0, 0);
  stack_layout_->setSpacing(2);
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(stack_box_);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  pages_->addWidget(scroll);
  pages_->addWidget(overlay_);

  auto* charts = new QSplitter(Qt::Horizontal, this);
  charts->addWidget(peak_);
  charts->addWidget(time_);
  charts->addWidget(scatter_);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(pages_);
  split->addWidget(charts);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  split->setSizes({620, 300});
  split->setChildrenCollapsible(false);

  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(6, 6, 6, 6);
  l->addLayout(bar);
  l->addWidget(split, 1);
  connect(normalized_, &QRadioButton::toggled, this,
          [this](bool on) { setTimeMode(on ? TimeMode::Normalized : TimeMode::Absolute); });
  connect(overlaid_, &QRadioButton::toggled, this, [this](bool on) { setOverlay(on); });
  rebuild();
}

void CompareView::setRuns(const std::vector<RunEntry>& compared, const std::vector<RunEntry>& all) {
  compared_ = compared;
  all_ = all;
  dirty_ = true;
  if (isVisible()) rebuild();
}

void CompareView::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (dirty_) rebuild();
}

void CompareView::setTimeMode(TimeMode m) {
  if (m == mode_) return;
  mode_ = m;
  (m == TimeMode::Normalized ? normalized_ : absolute_)->setChecked(true);
  dirty_ = true;
  if (isVisible()) rebuild();
}

void CompareView::setOverlay(bool on) {
  overlay_on_ = on;
  (on ? overlaid_ : stacked_)->setChecked(true);
  pages_->setCurrentIndex(on ? 1 : 0);
}

void CompareView::rebuild() {
  dirty_ = false;
  for (MemoryTimelineView* v : timelines_) {
    stack_layout_->removeWidget(v);
    v->hide();
    v->deleteLater();
  }
  timelines_.clear();
  hint_->setText(compared_.size() < 2
                     ? tr("<i>Check two or more runs in the run list to compare them (%1 checked).</i>").arg(compared_.size())
                     : tr("<b>%1 runs</b> on one time axis: zoom or pan any of them.").arg(compared_.size()));
  double extent = 0, vmax = 0;
  for (const RunEntry& r : compared_) {
    auto* v = new MemoryTimelineView(stack_box_);
    v->setCompact(true);
    v->setTimeMode(mode_);
    v->setTrace(r.trace, r.label);
    v->setMinimumHeight(170);
    extent = std::max(extent, v->dataTimeRange().upper);
    vmax = std::max(vmax, v->dataValueMax());
    stack_layout_->addWidget(v);
    v->show();
    timelines_.append(v);
    QObject* src = v;
    connect(v->plot()->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
            [this, src](const QCPRange& range) { sync(src, range); });
  }
  for (MemoryTimelineView* v : timelines_) {
    v->setTimeExtent(extent);
    v->setValueMax(vmax);
    v->resetZoom();
  }
  overlay_->setRuns(compared_, mode_);

  std::vector<const Trace*> traces;
  for (const auto& r : compared_) traces.push_back(r.trace.get());
  const auto rel = relate_runs(traces);
  QStringList labels, peak_notes, time_notes;
  QVector<double> peaks, times;
  QVector<QColor> colors;
  for (std::size_t i = 0; i < compared_.size(); ++i) {
    const Trace& t = *compared_[i].trace;
    labels << QString("#%1 %2").arg(compared_[i].id).arg(QString::fromStdString(t.policy));
    peaks << static_cast<double>(t.peak_bytes);
    times << t.median_step_ms();
    colors << run_color(compared_[i].id);
    const bool base = rel[i].baseline == static_cast<int>(i);
    peak_notes << (base ? tr("baseline")
                        : rel[i].peak_reduction_pct ? QString("−%1 %").arg(*rel[i].peak_reduction_pct, 0, 'f', 1).replace("−-", "+")
                                                    : QString());
    time_notes << (base ? tr("baseline") : rel[i].step_overhead_pct ? human_percent(*rel[i].step_overhead_pct) : QString());
  }
  peak_->setBars(labels, peaks, colors, peak_notes);
  time_->setBars(labels, times, colors, time_notes);
  scatter_->setRuns(all_);
}

void CompareView::sync(QObject* from, const QCPRange& r) {
  if (syncing_) return;
  syncing_ = true;
  for (MemoryTimelineView* v : timelines_) {
    if (v == from) continue;
    v->plot()->xAxis->setRange(r);
    v->plot()->replot(QCustomPlot::rpQueuedReplot);
  }
  syncing_ = false;
}

void CompareView::resetZoom() {
  for (MemoryTimelineView* v : timelines_) v->resetZoom();
  overlay_->resetZoom();
}

}  // namespace remat::gui
