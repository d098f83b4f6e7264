#include "views/op_timeline_view.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMouseEvent>
#include <QSaveFile>
#include <algorithm>
#include <cctype>
#include <qcustomplot.h>

#include "core/analysis/block_names.h"
#include "format.h"
#include "theme.h"
#include "views/span_plottable.h"

namespace remat::gui {

namespace {
QString stream_label(Stream s) {
  switch (s) {
    case Stream::Compute: return QObject::tr("compute");
    case Stream::CopyToHost: return QObject::tr("to host");
    case Stream::CopyToDevice: return QObject::tr("to device");
    case Stream::Host: return QObject::tr("host");
    case Stream::Comm: return QObject::tr("comm");
  }
  return {};
}

bool contains_nocase(const std::string& hay, const std::string& lower_needle) {
  return std::search(hay.begin(), hay.end(), lower_needle.begin(), lower_needle.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         }) != hay.end();
}
}  // namespace

OpTimelineView::OpTimelineView(QWidget* parent)
    : SpanTimelineView(parent), data_(std::make_shared<const SliceViewData>()), tree_(&data_->tree) {
  plot_->xAxis->setLabel(tr("time in the step"));
  plot_->setMinimumHeight(170);
  bars()->setBarHeight(0.84);
  QFont f = font();
  f.setPointSizeF(f.pointSizeF() * 0.8);
  bars()->setLabelFont(f);
  bars()->setLabeler([this](std::size_t row, std::uint32_t index) {
    return trace_ ? QString::fromStdString(tree_->name(*trace_, static_cast<int>(row), static_cast<int>(index))) : QString();
  });
  connect(plot_, &QCustomPlot::mousePress, this, &OpTimelineView::onPress);
  connect(plot_, &QCustomPlot::mouseRelease, this, &OpTimelineView::onRelease);
  connect(plot_->selectionRect(), &QCPSelectionRect::accepted, this, [this](const QRect& r, QMouseEvent*) {
    const double a = plot_->xAxis->pixelToCoord(r.left()), b = plot_->xAxis->pixelToCoord(r.right());
    selectTimeRange(timeOrigin() + static_cast<std::int64_t>(std::min(a, b)),
                    timeOrigin() + static_cast<std::int64_t>(std::max(a, b)));
  });
}

void OpTimelineView::setTrace(std::shared_ptr<const Trace> t, std::int64_t origin, std::int64_t duration) {
  auto d = t ? std::make_shared<const SliceViewData>(slice_view_data(*t)) : nullptr;
  setData(std::move(t), std::move(d), origin, duration);
}

void OpTimelineView::setData(std::shared_ptr<const Trace> t, std::shared_ptr<const SliceViewData> d,
                             std::int64_t origin, std::int64_t duration) {
  static const auto empty = std::make_shared<const SliceViewData>();
  trace_ = std::move(t);
  data_ = trace_ && d ? std::move(d) : empty;
  tree_ = &data_->tree;
  memory_.reset();
  selected_ = {-1, -1};
  matches_.clear();
  current_ = -1;
  range_t0_ = 0;
  range_t1_ = -1;
  bars()->setHighlight(-1, 0, 0);
  bars()->setTimeSelection(0, -1);
  QStringList labels;
  for (const SliceTrack& tr : tree_->tracks())
    labels << (tr.stream == Stream::Compute ? QString::fromLatin1(to_string(tr.level))
               : tr.depth ? stream_label(tr.stream) + QStringLiteral(" ") + QString::number(tr.depth + 1)
                          : stream_label(tr.stream));
  QVector<QColor> colors;
  for (int p = 0; p < kNumPhases; ++p) colors << phase_color(static_cast<Phase>(p));
  colors << QColor(0x9a, 0xa4, 0xb0);  // steps: no phase
  QStringList names;
  QVector<QColor> legend;
  for (int p = 0; p < kNumPhases; ++p)
    if (data_->phases[static_cast<std::size_t>(p)]) {
      names << QString::fromLatin1(to_string(static_cast<Phase>(p)));
      legend << phase_color(static_cast<Phase>(p));
    }
  setTimeAxis(origin, duration);
  setRows(std::shared_ptr<const SpanRows>(data_, &data_->rows), labels, colors, names, legend);
  emit matchChanged(-1, 0);
}

std::pair<int, int> OpTimelineView::sliceAt(const QPointF& pos) const {
  int row = -1;
  const Span* s = bars()->spanAt(pos, &row);
  if (!s) return {-1, -1};
  return {row, static_cast<int>(s->index)};
}

void OpTimelineView::selectSlice(int track, int slice) {
  const auto& tracks = tree_->tracks();
  if (track < 0 || static_cast<std::size_t>(track) >= tracks.size() || slice < 0 ||
      static_cast<std::size_t>(slice) >= tracks[static_cast<std::size_t>(track)].slices.size()) {
    selected_ = {-1, -1};
    bars()->setHighlight(-1, 0, 0);
  } else {
    selected_ = {track, slice};
    const Slice& s = tracks[static_cast<std::size_t>(track)].slices[static_cast<std::size_t>(slice)];
    bars()->setHighlight(track, s.start, s.end);
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
  emit sliceSelected(selected_.first, selected_.second);
}

std::optional<std::pair<double, double>> OpTimelineView::selection() const {
  const double o = static_cast<double>(timeOrigin());
  if (range_t1_ >= range_t0_) return std::pair{static_cast<double>(range_t0_) - o, static_cast<double>(range_t1_) - o};
  const auto [track, slice] = selected_;
  if (track < 0) return std::nullopt;
  const Slice& s = tree_->tracks()[static_cast<std::size_t>(track)].slices[static_cast<std::size_t>(slice)];
  return std::pair{static_cast<double>(s.start) - o, static_cast<double>(s.end) - o};
}

QString OpTimelineView::sliceDetails(int track, int slice) const {
  const auto& tracks = tree_->tracks();
  if (!trace_ || track < 0 || static_cast<std::size_t>(track) >= tracks.size() || slice < 0 ||
      static_cast<std::size_t>(slice) >= tracks[static_cast<std::size_t>(track)].slices.size())
    return tr("<i>Click a slice to see its details; Shift+drag to select a time range.</i>");
  const SliceTrack& tk = tracks[static_cast<std::size_t>(track)];
  const Slice& s = tk.slices[static_cast<std::size_t>(slice)];
  const auto& order = tree_->stream_ops(tk.stream);
  const OpRecord& o = trace_->ops[order[s.first]];
  std::uint64_t lo = o.op_id, hi = o.op_id;
  for (std::uint32_t k = s.first; k < s.last; ++k) {
    lo = std::min(lo, trace_->ops[order[k]].op_id);
    hi = std::max(hi, trace_->ops[order[k]].op_id);
  }
  if (!memory_) memory_ = std::make_unique<OpMemoryIndex>(*trace_);
  const OpMemory m = memory_->between(lo, hi);
  auto row = [](const QString& k, const QString& v) { return "<tr><td><b>" + k + "</b></td><td>" + v + "</td></tr>"; };
  QString h = "<table cellspacing='2'>";
  h += row(tr("name"), QString::fromStdString(tree_->name(*trace_, track, slice)).toHtmlEscaped());
  h += row(tr("level"), QString::fromLatin1(to_string(tk.level)) + " · " + stream_label(tk.stream));
  if (tk.level >= SliceLevel::Op) h += row(tr("op"), QString::fromStdString(o.op).toHtmlEscaped());
  if (tk.stream == Stream::Comm && s.last - s.first == 1)
    h += row(tr("ranks"), o.ranks.empty() ? tr("not recorded") : QString::fromStdString(ranks_text(o.ranks)));
  if (tk.level >= SliceLevel::Block) h += row(tr("block"), s.block >= 0 ? QString::number(s.block + tree_->first_block()) : tr("none"));
  if (tk.level >= SliceLevel::Phase) h += row(tr("phase"), QString::fromLatin1(to_string(s.phase)));
  h += row(tr("step"), QString::number(s.step));
  if (s.last - s.first > 1) h += row(tr("records"), QString::number(s.last - s.first));
  h += row(tr("time"), human_time_ns(static_cast<double>(s.end - s.start)) + tr(" at ") +
                           human_time_ns(static_cast<double>(s.start - timeOrigin())));
  h += row(tr("FLOPs"), human_flops(static_cast<double>(tree_->flops(*trace_, track, slice))));
  h += row(tr("bytes"), human_bytes(static_cast<double>(tree_->bytes(*trace_, track, slice))));
  h += row(tr("allocated"), QString("%1 in %2").arg(human_bytes(static_cast<double>(m.allocated))).arg(m.allocations));
  h += row(tr("freed"), QString("%1 in %2").arg(human_bytes(static_cast<double>(m.freed))).arg(m.frees));
  h += row(tr("op ids"), lo == hi ? QString::number(lo) : QString("%1–%2").arg(lo).arg(hi));
  return h + "</table>";
}

QString OpTimelineView::describe(const Span& s, int row) const {
  if (!trace_) return {};
  return sliceDetails(row, static_cast<int>(s.index));
}

int OpTimelineView::find(const QString& text) {
  matches_.clear();
  current_ = -1;
  const std::string needle = text.trimmed().toLower().toStdString();
  if (trace_ && !needle.empty()) {
    const int first = tree_->first_block();  // a pipeline stage's ops by the whole model's blocks
    for (std::uint32_t i = 0; i < trace_->ops.size(); ++i) {
      const OpRecord& o = trace_->ops[i];
      const std::string name = first ? global_op_name(first, o.name) : o.name;
      if (contains_nocase(name, needle) || contains_nocase(o.op, needle)) matches_.push_back(i);
    }
    std::stable_sort(matches_.begin(), matches_.end(), [this](std::uint32_t a, std::uint32_t b) {
      return trace_->ops[a].start_ns < trace_->ops[b].start_ns;
    });
  }
  emit matchChanged(current_, matchCount());
  return matchCount();
}

void OpTimelineView::next() {
  if (!matches_.empty()) gotoMatch(current_ < 0 ? 0 : (current_ + 1) % matchCount());
}

void OpTimelineView::previous() {
  if (!matches_.empty()) gotoMatch(current_ <= 0 ? matchCount() - 1 : current_ - 1);
}

void OpTimelineView::gotoMatch(int k) {
  current_ = k;
  const std::uint32_t op = matches_[static_cast<std::size_t>(k)];
  const OpRecord& o = trace_->ops[op];
  showTime(o.start_ns, o.end_ns);
  const auto [track, slice] = tree_->leaf_of(op);
  selectSlice(track, slice);
  emit matchChanged(current_, matchCount());
}

void OpTimelineView::showTime(std::int64_t start, std::int64_t end) {
  QCPAxis* x = plot_->xAxis;
  const double a = static_cast<double>(start - timeOrigin()), b = static_cast<double>(end - timeOrigin());
  QCPRange r = x->range();
  const double px = plot_->axisRect()->width() > 0 ? plot_->axisRect()->width() : 1;
  const double wide_px = (b - a) / r.size() * px;
  if (wide_px < 8 || b - a > r.size()) {
    // Zoom so the slice is about a twentieth of the view (at least 8 px), centered.
    const double size = std::max((b - a) * 20, 1000.0);
    r = QCPRange((a + b) / 2 - size / 2, (a + b) / 2 + size / 2);
  } else if (a < r.lower || b > r.upper) {
    r = QCPRange((a + b) / 2 - r.size() / 2, (a + b) / 2 + r.size() / 2);
  }
  x->setRange(r);
  plot_->replot();
}

void OpTimelineView::zoomToComputeOps(std::size_t first, std::size_t n) {
  const auto& order = tree_->stream_ops(Stream::Compute);
  if (!trace_ || first >= order.size() || n == 0) return;
  const std::size_t last = std::min(order.size(), first + n) - 1;
  const double a = static_cast<double>(trace_->ops[order[first]].start_ns - timeOrigin());
  const double b = static_cast<double>(trace_->ops[order[last]].end_ns - timeOrigin());
  const double pad = (b - a) * 0.02;
  plot_->xAxis->setRange(a - pad, b + pad);
  plot_->replot();
}

bool OpTimelineView::saveScreenshot(const QString& path, QString* error) const {
  plot_->replot(QCustomPlot::rpImmediateRefresh);
  const QImage image = plot_->toPixmap().toImage();
  QSaveFile f(path);
  if (!f.open(QIODevice::WriteOnly) || !image.save(&f, "PNG") || !f.commit()) {
    if (error) *error = tr("cannot write %1").arg(path);
    return false;
  }
  const QRect area = plot_->axisRect()->rect();
  const int leaf = tree_->leaf_track(Stream::Compute);
  QJsonObject o;
  o["x"] = area.left();
  o["y"] = area.top();
  o["width"] = area.width();
  o["height"] = area.height();
  if (leaf >= 0) {
    const int at = bars()->positionOf(leaf);  // where the leaf track is drawn (tracks may be moved)
    const double y0 = plot_->yAxis->coordToPixel(at - 0.42), y1 = plot_->yAxis->coordToPixel(at + 0.42);
    o["bar_top"] = static_cast<int>(std::ceil(std::min(y0, y1)));
    o["bar_bottom"] = static_cast<int>(std::floor(std::max(y0, y1)));
  }
  QJsonArray edges;
  for (const auto& b : bars()->lastBars())
    if (static_cast<int>(b.row) == leaf && b.count == 1 && !b.clipped) edges.append(QJsonArray{b.x0, b.x1});
  o["leaf_slices"] = edges;
  QSaveFile j(path + ".json");
  if (!j.open(QIODevice::WriteOnly) || j.write(QJsonDocument(o).toJson()) < 0 || !j.commit()) {
    if (error) *error = tr("cannot write %1.json").arg(path);
    return false;
  }
  return true;
}

void OpTimelineView::selectTimeRange(std::int64_t t0, std::int64_t t1) {
  range_t0_ = t0;
  range_t1_ = t1;
  bars()->setTimeSelection(t0, t1);
  plot_->replot(QCustomPlot::rpQueuedReplot);
  emit rangeSelected(t0, t1);
}

void OpTimelineView::onPress(QMouseEvent* e) {
  press_ = e->position();
  // Shift+drag draws a selection rectangle instead of panning.
  shift_drag_ = e->button() == Qt::LeftButton && e->modifiers().testFlag(Qt::ShiftModifier);
  plot_->setSelectionRectMode(shift_drag_ ? QCP::srmCustom : QCP::srmNone);
}

void OpTimelineView::onRelease(QMouseEvent* e) {
  const bool click = e->button() == Qt::LeftButton && (e->position() - press_).manhattanLength() < 4;
  if (shift_drag_) {
    // The plot ends the selection rectangle after this signal (accepted, or cancelled on a
    // click); the mode is set again on the next press.
    shift_drag_ = false;
    if (click) selectTimeRange(0, -1);  // a Shift+click clears the range
    return;
  }
  if (!click) return;
  const auto [track, slice] = sliceAt(e->position());
  selectSlice(track, slice);
}

}  // namespace remat::gui
