#include "views/run_view.h"

#include <QLabel>
#include <QSplitter>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "format.h"
#include "views/memory_timeline_view.h"
#include "views/op_timeline_pane.h"
#include "views/op_timeline_view.h"
#include "views/schedule_strip.h"

namespace remat::gui {

RunView::RunView(QWidget* parent)
    : QWidget(parent),
      summary_(new QLabel(this)),
      memory_(new MemoryTimelineView(this)),
      schedule_(new ScheduleStrip(this)),
      op_pane_(new OpTimelinePane(this)),
      ops_(op_pane_->view()) {
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(4, 4, 4, 4);
  l->setSpacing(2);
  summary_->setTextFormat(Qt::RichText);
  summary_->setWordWrap(true);
  summary_->setContentsMargins(8, 2, 8, 2);
  summary_->setText(tr("<i>No run yet: pick a model and a policy and press Run (Ctrl+R), or open a run directory (Ctrl+O).</i>"));
  l->addWidget(summary_);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(memory_);
  split->addWidget(schedule_);
  split->addWidget(op_pane_);
  split->setStretchFactor(0, 5);
  split->setStretchFactor(1, 2);
  split->setStretchFactor(2, 2);
  split->setChildrenCollapsible(false);
  auto* side = new QSplitter(Qt::Horizontal, this);
  side->addWidget(split);
  side->addWidget(op_pane_->sidePanel());
  side->setStretchFactor(0, 4);
  side->setStretchFactor(1, 1);
  l->addWidget(side, 1);
  for (PlotView* v : std::initializer_list<PlotView*>{memory_, schedule_, ops_}) {
    QObject* src = v;
    connect(v->plot()->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
            [this, src](const QCPRange& r) { sync(src, r); });
  }
}

void RunView::setTrace(std::shared_ptr<const Trace> t, const QString& title) {
  trace_ = std::move(t);
  memory_->setTrace(trace_, title);
  const QCPRange r = memory_->dataTimeRange();
  const std::int64_t origin = memory_->origin(), duration = static_cast<std::int64_t>(r.upper);
  schedule_->setTrace(trace_, origin, duration);
  op_pane_->setTrace(trace_, origin, duration);
  if (!trace_) {
    summary_->clear();
    return;
  }
  const Trace& tr = *trace_;
  QString s = QString("<b>%1</b> · %2%3 on %4 · peak <b>%5</b> (predicted %6) · step %7 ms · %8 ops")
                  .arg(QString::fromStdString(tr.model.name).toHtmlEscaped(),
                       QString::fromStdString(tr.policy).toHtmlEscaped(),
                       tr.policy_params.empty() ? QString() : ":" + QString::fromStdString(tr.policy_params).toHtmlEscaped(),
                       QString::fromStdString(tr.device), human_bytes(static_cast<double>(tr.peak_bytes)),
                       human_bytes(static_cast<double>(tr.predicted_peak_bytes)))
                  .arg(tr.median_step_ms(), 0, 'f', 2)
                  .arg(tr.ops.size());
  if (!tr.complete)
    s += QString(" · <span style='color:#d62728'><b>%1</b>: %2</span>")
             .arg(QString::fromStdString(tr.status), QString::fromStdString(tr.error).toHtmlEscaped());
  summary_->setText(s);
  resetZoom();
}

void RunView::sync(QObject* from, const QCPRange& r) {
  if (syncing_) return;
  syncing_ = true;
  for (PlotView* v : std::initializer_list<PlotView*>{memory_, schedule_, ops_}) {
    if (v == from) continue;
    v->plot()->xAxis->setRange(r);
    v->plot()->replot(QCustomPlot::rpQueuedReplot);
  }
  syncing_ = false;
}

void RunView::resetZoom() {
  memory_->resetZoom();
}

void RunView::zoom(double factor) {
  QCPAxis* x = memory_->plot()->xAxis;
  x->scaleRange(factor, x->range().center());
  memory_->plot()->replot();
}

}  // namespace remat::gui
