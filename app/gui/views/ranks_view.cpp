#include "views/ranks_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QLabel>
#include <QSplitter>
#include <QVBoxLayout>

#include "core/analysis/rank_check.h"
#include "core/analysis/rank_lanes.h"
#include "core/analysis/run_layout.h"
#include "format.h"
#include <qcustomplot.h>

#include "views/ranks_memory_view.h"
#include "views/ranks_peak_chart.h"
#include "views/ranks_timeline_view.h"

namespace remat::gui {

RanksView::RanksView(QWidget* parent)
    : QWidget(parent),
      title_(new QLabel(this)),
      picker_(new QComboBox(this)),
      peaks_(new RanksPeakChart(this)),
      timelines_(new RanksTimelineView(this)),
      memory_(new RanksMemoryView(this)),
      flows_(new QCheckBox(tr("Flows"), this)),
      hint_(new QLabel(this)),
      banner_(new QLabel(this)) {
  banner_->setWordWrap(true);
  banner_->setTextFormat(Qt::RichText);
  banner_->setStyleSheet("QLabel { background: #fff4ce; color: #4a3b00; border: 1px solid #e0c060; "
                         "border-radius: 3px; padding: 4px 8px; }");
  banner_->hide();
  auto* top = new QHBoxLayout;
  top->addWidget(title_, 1);
  auto* pick = new QLabel(tr("Show:"), this);
  pick->setBuddy(picker_);
  top->addWidget(pick);
  top->addWidget(picker_);
  picker_->setToolTip(tr("All ranks here, or one rank's run view (its memory and op timelines)"));
  hint_->setText(tr("Open a directory of several ranks (written by <tt>rematlab-batch run --tp T --dp D --pp P</tt>) to see its ranks here."));
  hint_->setWordWrap(true);
  flows_->setChecked(true);
  flows_->setToolTip(tr("Arrows from each collective to its partners on the other ranks"));
  top->addWidget(flows_);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(peaks_);
  split->addWidget(memory_);
  split->addWidget(timelines_);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 2);
  split->setStretchFactor(2, 3);
  // The memory lanes and the op lanes share the time axis and the keyboard's selection.
  for (PlotView* v : std::initializer_list<PlotView*>{memory_, timelines_}) {
    QObject* src = v;
    connect(v->plot()->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
            [this, src](const QCPRange& r) {
              PlotView* other = src == memory_ ? static_cast<PlotView*>(timelines_) : memory_;
              if (other->plot()->xAxis->range() == r) return;
              other->plot()->xAxis->setRange(r);
              other->plot()->replot(QCustomPlot::rpQueuedReplot);
            });
  }
  PlotView::linkTimeViews({memory_, timelines_});
  connect(flows_, &QCheckBox::toggled, timelines_, &RanksTimelineView::setFlowsShown);
  auto* v = new QVBoxLayout(this);
  v->addLayout(top);
  v->addWidget(hint_);
  v->addWidget(banner_);
  v->addWidget(split, 1);
  connect(picker_, qOverload<int>(&QComboBox::activated), this, [this](int i) {
    if (i > 0) {
      emit rankChosen(dir_, picker_->itemData(i).toInt());
      picker_->setCurrentIndex(0);  // this page stays the view of all ranks
    }
  });
  clear();
}

void RanksView::clear() {
  dir_.clear();
  ranks_ = RanksDir{};
  title_->setText(tr("No run of several ranks is open"));
  picker_->clear();
  picker_->setEnabled(false);
  hint_->setVisible(true);
  banner_->hide();
  peaks_->setPeaks({});
  timelines_->setRanks({});
  memory_->setRanks({});
}

QString RanksView::title() const { return title_->text(); }

QString RanksView::banner() const { return banner_->isVisibleTo(this) ? banner_->text() : QString(); }

void RanksView::setRanks(const QString& dir, const RanksDir& r, std::vector<std::shared_ptr<const Trace>> traces) {
  dir_ = dir;
  ranks_ = r;
  RunLayout l;
  l.tp = r.tp;
  l.dp = r.dp;
  l.sp = r.sp;
  l.distributed_checkpoints = r.distribute_saved_activations;
  l.zero = r.zero;
  l.pp = r.pp;
  const int peak = peak_rank(r);
  QString t = tr("<b>%1</b> · %2 ranks (%3)").arg(QFileInfo(dir).fileName().toHtmlEscaped()).arg(r.world_size)
                  .arg(QString::fromStdString(layout_label(l)));
  if (!r.complete) t += " · " + tr("incomplete: %1").arg(QString::fromStdString(r.error).toHtmlEscaped());
  title_->setText(t);
  picker_->clear();
  picker_->addItem(tr("All ranks"), -1);
  for (const auto& row : r.ranks) {
    QString s = r.pp > 1 ? tr("rank %1 (stage %2, tp rank %3, dp rank %4)").arg(row.rank).arg(row.pp_rank)
                               .arg(row.tp_rank).arg(row.dp_rank)
                         : tr("rank %1 (tp rank %2, dp rank %3)").arg(row.rank).arg(row.tp_rank).arg(row.dp_rank);
    if (row.rank == peak) s += tr(" · peak");
    if (!row.complete) s += " · " + QString::fromStdString(row.status);
    picker_->addItem(s, row.rank);
    const bool readable = static_cast<std::size_t>(row.rank) < traces.size() && traces[static_cast<std::size_t>(row.rank)];
    if (!readable) picker_->setItemData(picker_->count() - 1, false, Qt::UserRole - 1);  // not selectable
  }
  picker_->setEnabled(true);
  hint_->setVisible(false);
  traces.resize(static_cast<std::size_t>(r.world_size));
  // A rank of another job is left out of every chart, and said.
  {
    std::vector<const Trace*> read;
    for (const auto& x : traces) read.push_back(x.get());
    QStringList foreign;
    for (const RankIssue& i : check_ranks(r, read))
      if (!i.missing) {
        foreign << QString::fromStdString(i.what).toHtmlEscaped();
        traces[static_cast<std::size_t>(i.rank)].reset();
      }
    banner_->setText(foreign.isEmpty() ? QString() : tr("Left out of the charts: %1").arg(foreign.join("<br>")));
    banner_->setVisible(!foreign.isEmpty());
  }
  std::vector<const Trace*> raw;
  for (const auto& x : traces) raw.push_back(x.get());
  std::vector<RankPeak> peaks = rank_peaks(raw);
  // A rank without a readable run still has its figures in ranks.json.
  for (auto& p : peaks)
    if (!raw[static_cast<std::size_t>(p.rank)]) {
      const RankRow& row = r.ranks[static_cast<std::size_t>(p.rank)];
      p.complete = row.complete;
      p.measured = row.peak_bytes;
      p.predicted = row.predicted_peak_bytes;
    }
  peaks_->setPeaks(peaks);
  memory_->setRanks(traces);
  timelines_->setRanks(std::move(traces));
}

}  // namespace remat::gui

namespace remat::gui {

QJsonObject RanksView::screenshotGeometry(const QWidget* window, double dpr) const {
  auto rect = [&](const PlotView* v) {
    const QRect a = v->plot()->axisRect()->rect();
    const QPoint tl = v->plot()->mapTo(window, a.topLeft());
    QJsonObject o;
    o["x"] = static_cast<int>(tl.x() * dpr);
    o["y"] = static_cast<int>(tl.y() * dpr);
    o["width"] = static_cast<int>(a.width() * dpr);
    o["height"] = static_cast<int>(a.height() * dpr);
    return o;
  };
  QJsonObject o;
  o["timeline"] = rect(timelines_);
  o["peaks"] = rect(peaks_);
  const QPoint origin = timelines_->plot()->mapTo(window, QPoint(0, 0));
  QJsonArray rows;
  const auto& lanes = timelines_->lanes().lanes;
  for (std::size_t r = 0; r < lanes.size(); ++r) {
    const double a = timelines_->plot()->yAxis->coordToPixel(static_cast<double>(r) - 0.3);
    const double b = timelines_->plot()->yAxis->coordToPixel(static_cast<double>(r) + 0.3);
    QJsonObject row;
    row["rank"] = lanes[r].rank;
    row["stream"] = QString::fromLatin1(to_string(lanes[r].stream));
    row["top"] = static_cast<int>((origin.y() + std::min(a, b)) * dpr);
    row["bottom"] = static_cast<int>((origin.y() + std::max(a, b)) * dpr);
    rows.append(row);
  }
  o["rows"] = rows;
  const QColor c = RanksTimelineView::commColor();
  o["comm_color"] = QJsonArray{c.red(), c.green(), c.blue()};
  o["ranks"] = ranks_.world_size;
  return o;
}

}  // namespace remat::gui
