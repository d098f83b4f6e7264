#include "views/ranks_timeline_view.h"

#include <qcustomplot.h>

#include "format.h"
#include "theme.h"
#include "views/flow_plottable.h"
#include "views/span_plottable.h"

namespace remat::gui {

namespace {
// Collectives: a color no phase has.
const QColor kComm(0x8e, 0x44, 0xad);
}  // namespace

QColor RanksTimelineView::commColor() { return kComm; }

RanksTimelineView::RanksTimelineView(QWidget* parent)
    : SpanTimelineView(parent),
      lanes_(std::make_shared<const RankLanes>()),
      links_(std::make_shared<const CollectiveLinks>()),
      flows_(new FlowPlottable(plot_->xAxis, plot_->yAxis)) {
  flows_->removeFromLegend();
  flows_->setColor(kComm.darker(130));
  flows_->setTimeMapping(0, 1.0);
  flows_->setRowOf([this](int rank) { return commPosition(rank); });
  flows_->setLinks(links_);
  plot_->xAxis->setLabel(tr("time in each rank's last step"));
  plot_->setMinimumHeight(200);
  bars()->setBarHeight(0.8);
}

void RanksTimelineView::setRanks(std::vector<std::shared_ptr<const Trace>> ranks) {
  ranks_ = std::move(ranks);
  raw_.clear();
  for (const auto& t : ranks_) raw_.push_back(t.get());
  lanes_ = std::make_shared<const RankLanes>(rank_lanes(raw_));
  links_ = std::make_shared<const CollectiveLinks>(collective_links(raw_));
  comm_row_.assign(raw_.size(), -1);
  for (std::size_t r = 0; r < lanes_->lanes.size(); ++r)
    if (lanes_->lanes[r].stream == Stream::Comm) comm_row_[static_cast<std::size_t>(lanes_->lanes[r].rank)] = static_cast<int>(r);
  flows_->setLinks(links_);
  QStringList labels;
  for (const RankLaneRow& l : lanes_->lanes)
    labels << (l.stream == Stream::Comm ? tr("%1 comm").arg(l.rank) : tr("rank %1").arg(l.rank));
  QVector<QColor> colors;
  for (int p = 0; p < kNumPhases; ++p) colors << phase_color(static_cast<Phase>(p));
  colors << kComm;
  QStringList names;
  QVector<QColor> legend;
  std::array<bool, kNumPhases> phases{};
  bool comm = false;
  for (const Trace* t : raw_)
    if (t)
      for (const auto& o : t->ops) {
        if (o.stream == Stream::Comm) comm = true;
        else phases[static_cast<std::size_t>(o.phase)] = true;
      }
  for (int p = 0; p < kNumPhases; ++p)
    if (phases[static_cast<std::size_t>(p)]) {
      names << QString::fromLatin1(to_string(static_cast<Phase>(p)));
      legend << phase_color(static_cast<Phase>(p));
    }
  if (comm) {
    names << tr("collective");
    legend << kComm;
  }
  setTimeAxis(0, lanes_->duration);
  setRows(std::shared_ptr<const SpanRows>(lanes_, &lanes_->rows), labels, colors, names, legend);
}

int RanksTimelineView::commPosition(int rank) const {
  const int row = rank >= 0 && static_cast<std::size_t>(rank) < comm_row_.size() ? comm_row_[static_cast<std::size_t>(rank)] : -1;
  return row >= 0 ? bars()->positionOf(row) : -1;
}

void RanksTimelineView::setFlowsShown(bool on) {
  flows_->setVisible(on);
  plot_->replot();
}

QString RanksTimelineView::describe(const Span& s, int row) const {
  const OpRecord* o = lane_op(*lanes_, raw_, static_cast<std::size_t>(row), s.index);
  if (!o) return {};
  const int rank = lanes_->lanes[static_cast<std::size_t>(row)].rank;
  QString h = tr("<b>%1</b> · rank %2<br>%3 · %4 at %5")
                  .arg(QString::fromStdString(o->name).toHtmlEscaped())
                  .arg(rank)
                  .arg(QString::fromLatin1(to_string(o->phase)), human_time_ns(static_cast<double>(o->end_ns - o->start_ns)),
                       human_time_ns(static_cast<double>(s.start)));
  if (o->stream == Stream::Comm) {
    h += tr("<br>%1 of %2").arg(QString::fromStdString(o->op), human_bytes(static_cast<double>(o->bytes)));
    h += o->ranks.empty() ? tr(", group not recorded") : tr(", ranks %1").arg(QString::fromStdString(ranks_text(o->ranks)));
  }
  return h;
}

}  // namespace remat::gui
