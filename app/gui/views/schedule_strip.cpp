#include "views/schedule_strip.h"

#include <qcustomplot.h>

#include "core/analysis/block_names.h"
#include "format.h"
#include "theme.h"

namespace remat::gui {

ScheduleStrip::ScheduleStrip(QWidget* parent) : SpanTimelineView(parent) {
  plot_->xAxis->setTickLabels(false);
  plot_->yAxis->setLabel(tr("block"));
  plot_->setMinimumHeight(90);
}

void ScheduleStrip::setTrace(std::shared_ptr<const Trace> t, std::int64_t origin, std::int64_t duration) {
  trace_ = std::move(t);
  std::vector<std::vector<Span>> rows;
  QStringList labels;
  std::array<bool, static_cast<int>(ActionClass::Count)> seen{};
  if (trace_) {
    // Rows: the blocks the run holds (a pipeline stage's only, named as the whole model numbers
    // them), the head (recorded with the last block's number), the rest.
    const int L = std::max(held_blocks(*trace_), 0);
    const int first = first_block(*trace_);
    bool head = false, other = false;
    for (const auto& r : trace_->schedule_records) {
      if (r.action == kHeadAction)
        head = true;
      else
        other = other || r.block < 0 || r.block >= L;
    }
    const std::size_t head_row = static_cast<std::size_t>(L), other_row = head_row + (head ? 1 : 0);
    rows.resize(other_row + (other ? 1 : 0));
    for (int b = 0; b < L; ++b) labels << QString::fromStdString(block_name(first, b));
    if (head) labels << tr("head");
    if (other) labels << tr("outside");
    for (std::size_t i = 0; i < trace_->schedule_records.size(); ++i) {
      const ScheduleRecord& r = trace_->schedule_records[i];
      const std::size_t row = r.action == kHeadAction           ? head_row
                              : r.block >= 0 && r.block < L ? static_cast<std::size_t>(r.block)
                                                            : other_row;
      ActionClass a = action_class(r.action);
      // A forward run again before the backward (from a checkpoint) is recomputation.
      if (a == ActionClass::Forward && r.phase == Phase::Recompute) a = ActionClass::Recompute;
      seen[static_cast<int>(a)] = true;
      rows[row].push_back({r.start_ns, std::max(r.end_ns, r.start_ns), static_cast<std::uint32_t>(i), static_cast<std::uint8_t>(a)});
    }
  }
  QVector<QColor> colors;
  for (int a = 0; a < static_cast<int>(ActionClass::Count); ++a) colors << action_color(static_cast<ActionClass>(a));
  QStringList names;
  QVector<QColor> legend;
  for (int a = 0; a < static_cast<int>(ActionClass::Count); ++a)
    if (seen[a]) {
      names << QString::fromLatin1(to_string(static_cast<ActionClass>(a)));
      legend << action_color(static_cast<ActionClass>(a));
    }
  setTimeAxis(origin, duration);
  setRows(std::make_shared<const SpanRows>(std::move(rows)), labels, colors, names, legend);
}

QString ScheduleStrip::describe(const Span& s, int) const {
  if (!trace_ || s.index >= trace_->schedule_records.size()) return {};
  const ScheduleRecord& r = trace_->schedule_records[s.index];
  QString h = QString("<b>%1</b>").arg(QString::fromStdString(r.action).toHtmlEscaped());
  if (r.block >= 0 && r.action != kHeadAction) h += QString(" block %1").arg(r.block + first_block(*trace_));
  if (!r.keep.empty() && r.action != "backward") h += "<br>keep " + QString::fromStdString(r.keep).toHtmlEscaped();
  h += QString("<br>action %1 · %2").arg(r.index).arg(QString::fromLatin1(to_string(r.phase)));
  h += "<br>" + human_time_ns(static_cast<double>(r.end_ns - r.start_ns)) + " at " +
       human_time_ns(static_cast<double>(r.start_ns - timeOrigin()));
  return h;
}

}  // namespace remat::gui
