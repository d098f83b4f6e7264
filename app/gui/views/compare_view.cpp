#include "views/compare_view.h"

#include <QButtonGroup>
#include <QHBoxLayout>
#include <QLabel>
#include <QRadioButton>
#include <QScrollArea>
#include <QSplitter>
#include <QStackedWidget>
#include <QVBoxLayout>
#include <nlohmann/json.hpp>
#include <qcustomplot.h>

#include "core/analysis/run_compare.h"
#include "core/analysis/run_groups.h"
#include "core/analysis/run_layout.h"
#include "format.h"
#include "theme.h"
#include "views/compare_charts.h"
#include "views/compare_overlay.h"

namespace remat::gui {

namespace {

QScrollArea* scroller(QWidget* inner, QWidget* parent) {
  auto* scroll = new QScrollArea(parent);
  scroll->setWidget(inner);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  return scroll;
}

QVBoxLayout* column(QWidget* box) {
  auto* l = new QVBoxLayout(box);
  l->setContentsMargins(0, 0, 0, 0);
  l->setSpacing(2);
  return l;
}

// "#3 selective"; a rank says which ("#9 none rank 0"), its group heading says the layout.
QString bar_label(const RunEntry& r) {
  const RunLayout l = run_layout(*r.trace);
  return QString("#%1 %2").arg(r.id).arg(QString::fromStdString(r.trace->policy)) +
         (l.distributed() ? QObject::tr(" rank %1").arg(l.rank) : QString());
}

}  // namespace

CompareView::CompareView(QWidget* parent)
    : QWidget(parent),
      hint_(new QLabel(this)),
      banner_(new QLabel(this)),
      absolute_(new QRadioButton(tr("&Absolute time"), this)),
      normalized_(new QRadioButton(tr("&Normalized to step time"), this)),
      stacked_(new QRadioButton(tr("&Stacked"), this)),
      overlaid_(new QRadioButton(tr("&Overlaid"), this)),
      pages_(new QStackedWidget(this)) {
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
  banner_->setWordWrap(true);
  banner_->setObjectName("compareGroupsBanner");
  banner_->setStyleSheet("QLabel { background: #fff4ce; color: #4a3b00; border: 1px solid #e0c060; "
                         "border-radius: 3px; padding: 4px 8px; }");
  banner_->hide();

  auto* stack_box = new QWidget;
  stack_layout_ = column(stack_box);
  auto* overlay_box = new QWidget;
  overlay_layout_ = column(overlay_box);
  auto* chart_box = new QWidget;
  chart_layout_ = column(chart_box);
  pages_->addWidget(scroller(stack_box, this));
  pages_->addWidget(scroller(overlay_box, this));

  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(pages_);
  split->addWidget(scroller(chart_box, this));
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  split->setSizes({380, 540});
  split->setChildrenCollapsible(false);

  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(6, 6, 6, 6);
  l->addLayout(bar);
  l->addWidget(banner_);
  l->addWidget(split, 1);
  connect(normalized_, &QRadioButton::toggled, this,
          [this](bool on) { setTimeMode(on ? TimeMode::Normalized : TimeMode::Absolute); });
  connect(overlaid_, &QRadioButton::toggled, this, [this](bool on) { setOverlay(on); });
  rebuild();
}

void CompareView::setRuns(const std::vector<RunEntry>& compared) {
  compared_ = compared;
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

QString CompareView::banner() const { return banner_->isHidden() ? QString() : banner_->text(); }

void CompareView::clear() {
  for (QWidget* w : made_) {
    w->hide();
    w->deleteLater();
  }
  made_.clear();
  timelines_.clear();
  timeline_groups_.clear();
  overlays_.clear();
  peaks_.clear();
  times_.clear();
  scatters_.clear();
  budget_frontiers_.clear();
}

void CompareView::rebuild() {
  dirty_ = false;
  clear();
  std::vector<const Trace*> traces;
  for (const auto& r : compared_) traces.push_back(r.trace.get());
  groups_.clear();
  for (const RunGroup& g : group_runs(traces)) {
    Group x{QString::fromStdString(g.label), {}};
    for (std::size_t i : g.members) x.runs.push_back(compared_[i]);
    groups_.push_back(std::move(x));
  }
  hint_->setText(compared_.size() < 2
                     ? tr("<i>Check two or more runs in the run list to compare them (%1 checked).</i>").arg(compared_.size())
                     : tr("<b>%1 runs</b> on one time axis per group: zoom or pan any of them.").arg(compared_.size()));
  const QString banner = QString::fromStdString(groups_banner(group_runs(traces)));
  banner_->setText(banner);
  banner_->setVisible(!banner.isEmpty());

  const bool headed = groups_.size() > 1;
  auto header = [this](QVBoxLayout* into, const QString& text) {
    auto* h = new QLabel("<b>" + text.toHtmlEscaped() + "</b>");
    into->addWidget(h);
    made_ << h;
  };
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    if (headed) header(stack_layout_, groups_[g].label);
    addTimelines(groups_[g].runs, static_cast<int>(g));
    if (headed) header(overlay_layout_, groups_[g].label);
    auto* o = new OverlayTimelineView;
    o->setMinimumHeight(240);
    overlay_layout_->addWidget(o);
    made_ << o;
    overlays_ << o;
    o->setRuns(groups_[g].runs, mode_);
    addCharts(groups_[g]);
  }
  for (const RunEntry& r : compared_) {
    if (r.trace->complete) continue;
    header(stack_layout_, tr("%1: incomplete, on its own scale").arg(r.label));
    addTimelines({r}, -1);
  }
  emit plotsRebuilt();
}

void CompareView::addTimelines(const std::vector<RunEntry>& runs, int group) {
  double extent = 0, vmax = 0;
  QList<MemoryTimelineView*> made;
  for (const RunEntry& r : runs) {
    auto* v = new MemoryTimelineView;
    v->setCompact(true);
    v->setTimeMode(mode_);
    v->setTrace(r.trace, r.label);
    v->setMinimumHeight(170);
    extent = std::max(extent, v->dataTimeRange().upper);
    vmax = std::max(vmax, v->dataValueMax());
    stack_layout_->addWidget(v);
    v->show();
    made << v;
    made_ << v;
    timelines_.append(v);
    timeline_groups_.append(group);
    QObject* src = v;
    connect(v->plot()->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
            [this, src](const QCPRange& range) { sync(src, range); });
  }
  for (MemoryTimelineView* v : made) {
    v->setTimeExtent(extent);
    v->setValueMax(vmax);
    v->resetZoom();
  }
}

void CompareView::addCharts(const Group& g) {
  auto* row = new QWidget;
  made_ << row;
  chart_layout_->addWidget(row);
  auto* rl = column(row);
  if (groups_.size() > 1) rl->addWidget(new QLabel("<b>" + g.label.toHtmlEscaped() + "</b>", row));
  auto* peak = new RunBarChart(tr("Peak memory (reduction against none)"), RunBarChart::Unit::Bytes, row);
  auto* time = new RunBarChart(tr("Step time: median, min–max (overhead against none)"), RunBarChart::Unit::Milliseconds, row);
  auto* scatter = new FrontierScatter(row);
  auto* budget = new BudgetFrontierChart(row);
  auto* charts = new QSplitter(Qt::Horizontal, row);
  // The three share the page's width: none asks for the width of its title on one line (the
  // titles break into lines), so the page never scrolls sideways. The budget line is under them.
  for (PlotView* c : std::initializer_list<PlotView*>{peak, time, scatter}) {
    c->setMinimumWidth(160);
    c->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Expanding);
    c->plot()->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Expanding);
    charts->addWidget(c);
    charts->setStretchFactor(charts->count() - 1, 1);
  }
  charts->setMinimumHeight(200);
  rl->addWidget(charts, 1);
  budget->setMinimumHeight(220);
  budget->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Expanding);
  rl->addWidget(budget, 1);
  peaks_ << peak;
  times_ << time;
  scatters_ << scatter;
  budget_frontiers_ << budget;

  std::vector<const Trace*> traces;
  for (const auto& r : g.runs) traces.push_back(r.trace.get());
  const auto rel = relate_runs(traces);
  QVector<RunBarChart::Bar> pb, tb;
  for (std::size_t i = 0; i < g.runs.size(); ++i) {
    const Trace& t = *g.runs[i].trace;
    const bool base = rel[i].baseline == static_cast<int>(i);
    const StepSpread ps = step_peak_spread(t), ts = step_time_spread(t);
    RunBarChart::Bar p{bar_label(g.runs[i]), static_cast<double>(t.peak_bytes), ps.min, ps.max, policy_color(t.policy), {}, false};
    if (base) p.note = tr("baseline");
    else if (rel[i].peak_reduction_pct) p.note = QString("−%1 %").arg(*rel[i].peak_reduction_pct, 0, 'f', 1).replace("−-", "+");
    RunBarChart::Bar b{p.label, ts.median, ts.min, ts.max, p.color, {}, false};
    if (base) {
      b.note = tr("baseline");
    } else if (rel[i].baseline >= 0) {
      const auto o = step_overhead(ts, step_time_spread(*traces[static_cast<std::size_t>(rel[i].baseline)]));
      if (o) {
        b.hatched = o->within_noise;
        b.note = !o->within_noise ? human_percent(o->pct) : o->spread_known ? tr("within noise") : tr("1 step: no spread");
      }
    }
    pb << p;
    tb << b;
  }
  peak->setBars(pb);
  time->setBars(tb);
  scatter->setRuns(g.runs);
  budgetLine(g, budget);
}

// The least recompute at each budget for the group's model (the optimal policy's line; the
// budget policy's where optimal is not loaded): RematLab's own single-process runs only (an
// imported or recorded trace has no model of ours to plan; a rank's table is its layout's).
void CompareView::budgetLine(const Group& g, BudgetFrontierChart* chart) {
  const Trace* model = nullptr;
  for (const auto& r : g.runs)
    if (r.trace->complete && r.trace->source == kOwnSource && !run_layout(*r.trace).distributed()) {
      model = r.trace.get();
      break;
    }
  if (!registry_ || !model) {
    chart->setUnavailable(!registry_ ? tr("no policy plugins loaded")
                                     : tr("single-process runs of RematLab only"));
    return;
  }
  const std::string key = model_to_json(model->model).dump();
  auto it = budget_lines_.find(key);
  if (it == budget_lines_.end()) {
    std::pair<std::shared_ptr<const Frontier>, QString> line;
    try {
      const char* policy = registry_->find("optimal") ? "optimal" : "budget";
      line.first = std::make_shared<const Frontier>(compute_frontier(*registry_, model->model, policy, 24, false));
    } catch (const std::exception& e) {
      line.second = tr("no budget line: %1").arg(QString::fromStdString(e.what()));
    }
    it = budget_lines_.emplace(key, std::move(line)).first;
  }
  std::vector<RunEntry> own;  // the points: runs of RematLab's own
  for (const auto& r : g.runs)
    if (r.trace->source == kOwnSource) own.push_back(r);
  if (it->second.first) chart->setFrontier(*it->second.first, own);
  else chart->setUnavailable(it->second.second);
}

void CompareView::sync(QObject* from, const QCPRange& r) {
  if (syncing_) return;
  syncing_ = true;
  const int group = timeline_groups_.value(timelines_.indexOf(static_cast<MemoryTimelineView*>(from)), -1);
  for (int i = 0; i < timelines_.size(); ++i) {
    MemoryTimelineView* v = timelines_[i];
    if (v == from || group < 0 || timeline_groups_[i] != group) continue;
    v->plot()->xAxis->setRange(r);
    v->plot()->replot(QCustomPlot::rpQueuedReplot);
  }
  syncing_ = false;
}

void CompareView::resetZoom() {
  for (MemoryTimelineView* v : timelines_) v->resetZoom();
  for (OverlayTimelineView* o : overlays_) o->resetZoom();
}

}  // namespace remat::gui
