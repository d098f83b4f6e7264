#include "views/op_timeline_view.h"

#include <qcustomplot.h>

#include "format.h"
#include "theme.h"

namespace remat::gui {

namespace {
QString stream_label(Stream s) {
  switch (s) {
    case Stream::Compute: return QObject::tr("compute");
    case Stream::CopyToHost: return QObject::tr("to host");
    case Stream::CopyToDevice: return QObject::tr("to device");
    case Stream::Host: return QObject::tr("host");
  }
  return {};
}
}  // namespace

OpTimelineView::OpTimelineView(QWidget* parent) : SpanTimelineView(parent) {
  plot_->xAxis->setLabel(tr("time in the step"));
  plot_->setMinimumHeight(110);
}

void OpTimelineView::setTrace(std::shared_ptr<const Trace> t, std::int64_t origin, std::int64_t duration) {
  trace_ = std::move(t);
  streams_.clear();
  std::vector<std::vector<Span>> rows;
  std::array<int, 4> row_of{-1, -1, -1, -1};
  if (trace_) {
    std::array<bool, 4> any{};
    for (const auto& o : trace_->ops) any[static_cast<int>(o.stream)] = true;
    for (int s = 0; s < 4; ++s)
      if (any[s]) {
        row_of[s] = static_cast<int>(streams_.size());
        streams_.push_back(static_cast<Stream>(s));
      }
    rows.resize(streams_.size());
    for (std::size_t i = 0; i < trace_->ops.size(); ++i) {
      const OpRecord& o = trace_->ops[i];
      rows[static_cast<std::size_t>(row_of[static_cast<int>(o.stream)])].push_back(
          {o.start_ns, o.end_ns, static_cast<std::uint32_t>(i), static_cast<std::uint8_t>(o.phase)});
    }
  }
  QStringList labels;
  for (Stream s : streams_) labels << stream_label(s);
  QVector<QColor> colors;
  for (int p = 0; p < kNumPhases; ++p) colors << phase_color(static_cast<Phase>(p));
  QStringList names;
  QVector<QColor> legend;
  std::array<bool, kNumPhases> seen{};
  if (trace_)
    for (const auto& o : trace_->ops) seen[static_cast<int>(o.phase)] = true;
  for (int p = 0; p < kNumPhases; ++p)
    if (seen[p]) {
      names << QString::fromLatin1(to_string(static_cast<Phase>(p)));
      legend << phase_color(static_cast<Phase>(p));
    }
  setTimeAxis(origin, duration);
  setRows(std::make_shared<const SpanRows>(std::move(rows)), labels, colors, names, legend);
}

QString OpTimelineView::describe(const Span& s, int row) const {
  if (!trace_ || s.index >= trace_->ops.size()) return {};
  const OpRecord& o = trace_->ops[s.index];
  QString h = "<b>" + QString::fromStdString(o.name).toHtmlEscaped() + "</b>";
  if (!o.op.empty() && o.op != o.name) h += " (" + QString::fromStdString(o.op).toHtmlEscaped() + ")";
  h += "<br>" + QString::fromLatin1(to_string(o.phase));
  if (o.block >= 0) h += QString(", block %1").arg(o.block);
  if (row >= 0 && static_cast<std::size_t>(row) < streams_.size())
    h += ", " + QString::fromLatin1(to_string(streams_[static_cast<std::size_t>(row)]));
  h += "<br>" + human_time_ns(static_cast<double>(o.end_ns - o.start_ns)) + " at " +
       human_time_ns(static_cast<double>(o.start_ns - timeOrigin()));
  if (o.flops) h += "<br>" + human_flops(static_cast<double>(o.flops));
  if (o.bytes) h += (o.flops ? ", " : "<br>") + human_bytes(static_cast<double>(o.bytes));
  return h;
}

}  // namespace remat::gui
