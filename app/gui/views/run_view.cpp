#include "views/run_view.h"

#include <QFutureWatcher>
#include <QLabel>
#include <QProgressBar>
#include <QSplitter>
#include <QStackedWidget>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>
#include <qcustomplot.h>

#include "format.h"
#include "run_header.h"
#include "views/memory_timeline_view.h"
#include "views/op_timeline_pane.h"
#include "views/op_timeline_view.h"
#include "views/run_view_data.h"
#include "views/schedule_strip.h"

namespace remat::gui {

RunView::RunView(QWidget* parent)
    : QWidget(parent),
      summary_(new QLabel(this)),
      memory_(new MemoryTimelineView(this)),
      schedule_(new ScheduleStrip(this)),
      op_pane_(new OpTimelinePane(this)),
      ops_(op_pane_->view()),
      no_ops_(new QLabel(this)),
      stack_(new QStackedWidget(this)),
      content_(new QWidget(this)),
      loading_page_(new QWidget(this)),
      loading_label_(new QLabel(loading_page_)),
      loading_bar_(new QProgressBar(loading_page_)) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  outer->addWidget(stack_);
  stack_->addWidget(content_);
  stack_->addWidget(loading_page_);
  auto* lp = new QVBoxLayout(loading_page_);
  lp->addStretch(1);
  loading_label_->setAlignment(Qt::AlignCenter);
  loading_label_->setWordWrap(true);
  lp->addWidget(loading_label_);
  loading_bar_->setRange(0, 0);  // busy: the steps of a load take unknown times
  loading_bar_->setMaximumWidth(320);
  lp->addWidget(loading_bar_, 0, Qt::AlignHCenter);
  lp->addStretch(2);
  auto* l = new QVBoxLayout(content_);
  l->setContentsMargins(4, 4, 4, 4);
  l->setSpacing(2);
  summary_->setTextFormat(Qt::RichText);
  summary_->setWordWrap(true);
  summary_->setContentsMargins(8, 2, 8, 2);
  l->addWidget(summary_);
  no_ops_->setWordWrap(true);
  no_ops_->setContentsMargins(8, 2, 8, 2);
  no_ops_->setForegroundRole(QPalette::PlaceholderText);
  no_ops_->setVisible(false);
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
  l->addWidget(no_ops_);
  PlotView::linkTimeViews({memory_, schedule_, ops_});
  for (PlotView* v : std::initializer_list<PlotView*>{memory_, schedule_, ops_}) {
    QObject* src = v;
    connect(v->plot()->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
            [this, src](const QCPRange& r) { sync(src, r); });
  }
}

namespace {
struct LoadResult {
  std::shared_ptr<const RunViewData> data;
  QString error;
  bool cancelled = false;
};
}  // namespace

void RunView::setTrace(std::shared_ptr<const Trace> t, const QString& title) {
  ++load_;
  if (cancel_) cancel_->store(true);
  cancel_.reset();
  if (!t || (data_ && data_->trace == t)) {  // none, or the run shown again: nothing to build
    loading_ = false;
    setData(t ? data_ : nullptr, title);
    if (t) emit loaded();
    return;
  }
  trace_ = t;
  loading_ = true;
  loading_label_->setText(tr("Loading %1…").arg(title.isEmpty() ? tr("the run") : title));
  loading_bar_->setVisible(true);
  showStartPage(false);
  stack_->setCurrentWidget(loading_page_);
  auto cancel = cancel_ = std::make_shared<std::atomic<bool>>(false);
  auto* watcher = new QFutureWatcher<LoadResult>(this);
  connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, title, load = load_] {
    LoadResult r = watcher->result();
    watcher->deleteLater();
    if (load != load_ || r.cancelled) return;  // another run was asked for since
    loading_ = false;
    cancel_.reset();
    if (!r.data) {
      loading_label_->setText(tr("Cannot show %1: %2").arg(title.isEmpty() ? tr("the run") : title, r.error));
      loading_bar_->setVisible(false);
      emit loadFailed(r.error);
      return;
    }
    setData(std::move(r.data), title);
    emit loaded();
  });
  // The worker holds the trace and the flag, never the view.
  watcher->setFuture(QtConcurrent::run([t = std::move(t), cancel]() -> LoadResult {
    try {
      return {prepare_run_view(t, *cancel), {}, false};
    } catch (const LoadCancelled&) {
      return {nullptr, {}, true};
    } catch (const std::bad_alloc&) {
      return {nullptr, QStringLiteral("out of memory while preparing the views"), false};
    } catch (const std::exception& e) {
      return {nullptr, QString::fromStdString(e.what()), false};
    } catch (...) {
      return {nullptr, QStringLiteral("an unknown error while preparing the views"), false};
    }
  }));
}

bool RunView::loadingPageShown() const { return stack_->currentWidget() == loading_page_; }

QString RunView::loadingText() const { return loading_label_->text(); }

void RunView::setData(std::shared_ptr<const RunViewData> d, const QString& title) {
  data_ = d && d->trace ? d : nullptr;
  trace_ = data_ ? data_->trace : nullptr;
  for (PlotView* v : std::initializer_list<PlotView*>{memory_, schedule_, ops_}) v->setMark(std::nullopt);
  if (trace_) {
    memory_->setData(trace_, d->memory, title, d->bands, d->layout);
  } else {
    memory_->setTrace(nullptr, title);
  }
  const QCPRange r = memory_->dataTimeRange();
  const std::int64_t origin = memory_->origin(), duration = static_cast<std::int64_t>(r.upper);
  schedule_->setTrace(trace_, origin, duration);
  if (trace_) op_pane_->setData(*d, origin, duration);
  else op_pane_->setTrace(nullptr, origin, duration);
  if (!trace_) {
    summary_->clear();
    showStartPage(true);
    return;
  }
  // Without ops (no step finished in full) the strip and the op timeline would be empty axes.
  const bool have_ops = !trace_->ops.empty() || !trace_->schedule_records.empty();
  // A trace without schedule actions (an imported profiler trace) has no strip to show.
  schedule_->setVisible(have_ops && !trace_->schedule_records.empty());
  op_pane_->setVisible(have_ops);
  op_pane_->sidePanel()->setVisible(have_ops);
  no_ops_->setVisible(!have_ops);
  no_ops_->setText(no_ops_note(*trace_));
  summary_->setText(run_header(*trace_));
  showStartPage(false);
  resetZoom();
}

void RunView::setStartPage(QWidget* page) {
  if (start_) {
    stack_->removeWidget(start_);
    start_->deleteLater();
  }
  start_ = page;
  if (!start_) return;
  stack_->insertWidget(0, start_);
  if (!loading_) showStartPage(!trace_);
}

void RunView::showStartPage(bool on) {
  stack_->setCurrentWidget(on && start_ ? start_ : content_);
}

bool RunView::startPageShown() const { return start_ && stack_->currentWidget() == start_; }

QString RunView::headerText() const { return summary_->text(); }

QString RunView::noOpsText() const { return no_ops_->isVisibleTo(this) ? no_ops_->text() : QString(); }

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
