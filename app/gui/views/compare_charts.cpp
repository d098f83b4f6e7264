#include "views/compare_charts.h"

#include <QFontMetrics>
#include <QResizeEvent>
#include <algorithm>
#include <qcustomplot.h>

#include "core/analysis/run_compare.h"
#include "format.h"
#include "theme.h"
#include "views/axis_tickers.h"
#include "views/plot_fit.h"

namespace remat::gui {

namespace {

// Not laid out yet (no size): a replot would paint into an empty buffer (QPainter warnings).
// The charts lay their labels out again when first resized.
bool unsized(const QCustomPlot* p) { return p->width() < 1 || p->height() < 1; }

// A title over the plot, in lines as wide as the plot (views/plot_fit.h).
void add_title(QCustomPlot* p, const QString& title) {
  p->plotLayout()->insertRow(0);
  auto* t = new QCPTextElement(p, title, QFont(p->font().family(), -1, QFont::DemiBold));
  p->plotLayout()->addElement(0, 0, t);
  p->plotLayout()->setRowStretchFactor(0, 0.001);
  QObject::connect(p, &QCustomPlot::beforeReplot, t, [p, t, title] { fit_title(t, title, p->viewport().width()); });
}

}  // namespace

RunBarChart::RunBarChart(const QString& title, Unit unit, QWidget* parent) : PlotView(parent), unit_(unit) {
  // A cached tick label of no size is painted into an empty pixmap (QPainter warnings, seen
  // when the bars are set); a handful of labels need no cache.
  plot_->setPlottingHint(QCP::phCacheLabels, false);
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

QString RunBarChart::labelText(int i) const {
  const Bar& b = bars_[i];
  // Three or four significant digits: the axis has the rest.
  const QString v = unit_ == Unit::Bytes ? human_bytes(b.value)
                                         : QString::number(b.value, 'f', b.value >= 100 ? 0 : b.value >= 10 ? 1 : 2) + " ms";
  if (b.note.isEmpty()) return v;
  return v + (one_line_ ? QString(" · ") : QString("\n")) + b.note;
}

void RunBarChart::setBars(const QVector<Bar>& bars) {
  plot_->clearPlottables();
  plot_->clearItems();
  bars_ = bars;
  labels_.clear();
  const QColor text = palette().color(QPalette::Text);
  for (int i = 0; i < bars_.size(); ++i) {
    const Bar& b = bars_[i];
    const QColor c = b.color.isValid() ? b.color : QColor(Qt::gray);
    auto* bar = new QCPBars(plot_->xAxis, plot_->yAxis);
    bar->setWidth(0.62);
    bar->addData(i, b.value);
    bar->setBrush(b.hatched ? QBrush(c, Qt::BDiagPattern) : QBrush(c));
    bar->setPen(QPen(c.darker(130), b.hatched ? 1.5 : 1.0));
    bar->setName(b.label);
    if (b.high > b.low) {
      auto* whisker = new QCPErrorBars(plot_->xAxis, plot_->yAxis);
      whisker->removeFromLegend();
      whisker->setDataPlottable(bar);
      whisker->addData(std::max(0.0, b.value - b.low), std::max(0.0, b.high - b.value));
      whisker->setPen(QPen(text, 1.2));
      whisker->setWhiskerWidth(8);
    }
    auto* label = new QCPItemText(plot_);
    label->position->setCoords(i, std::max(b.value, b.high));
    label->setColor(text);
    labels_.append(label);
  }
  plot_->xAxis->setRange(-0.6, std::max(0, barCount() - 1) + 0.6);
  style_plot(plot_, palette());
  layoutLabels();
}

void RunBarChart::layoutLabels() {
  if (bars_.isEmpty()) {
    plot_->yAxis->setRange(0, 1);
    plot_->replot();
    return;
  }
  if (unsized(plot_)) return;
  const QFontMetrics fm(labels_.front()->font());
  const QFontMetrics tick_fm(plot_->xAxis->tickLabelFont());
  // The bar's slot in pixels at the current size (the axis rect as last laid out).
  plot_->replot(QCustomPlot::rpImmediateRefresh);
  const double slot = plot_->axisRect()->width() / (barCount() + 0.2);
  // Run names: as they are when they fit their slot, else the number over the policy, each line
  // elided to the slot.
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (int i = 0; i < barCount(); ++i) {
    QString name = bars_[i].label;
    if (tick_fm.horizontalAdvance(name) > slot * 0.95) {
      QStringList lines = name.split(' ');
      if (lines.size() > 1) lines = QStringList{lines.front(), lines.mid(1).join(' ')};
      for (QString& line : lines) line = tick_fm.elidedText(line, Qt::ElideRight, static_cast<int>(slot * 0.95));
      name = lines.join('\n');
    }
    ticker->addTick(i, name);
  }
  plot_->xAxis->setTicker(ticker);
  plot_->xAxis->setTickLabelRotation(0);
  // Values: two lines over the bar when the widest line fits the slot, else one vertical line,
  // inside the bar when the bar is tall enough to hold it, else over it.
  vertical_ = false;
  one_line_ = false;
  for (int i = 0; i < barCount(); ++i)
    for (const QString& line : labelText(i).split('\n')) vertical_ = vertical_ || fm.horizontalAdvance(line) + 4 > slot;
  // Turned, the two lines stand side by side; one line when even that is too thick.
  one_line_ = vertical_ && 2 * fm.lineSpacing() + 4 > slot;
  plot_->replot(QCustomPlot::rpImmediateRefresh);  // the margins of the new tick labels
  const double h = plot_->axisRect()->height();
  double top = 0;
  QVector<double> need(barCount());
  for (int i = 0; i < barCount(); ++i) {
    const QString t = labelText(i);
    double widest = 0;
    for (const QString& line : t.split('\n')) widest = std::max(widest, static_cast<double>(fm.horizontalAdvance(line)));
    need[i] = (vertical_ ? widest : fm.lineSpacing() * (t.count('\n') + 1)) + 8.0;
    top = std::max(top, std::max(bars_[i].value, bars_[i].high));
  }
  // The value axis: room over the whiskers, and for two-line labels over every bar (the bar's
  // top at high / upper of the height, its label over it, all inside the rect). Vertical labels
  // never stretch it: each goes inside its bar when it fits there, else over it, else it is
  // elided to the longer of the two spaces.
  double upper = top > 0 ? top * 1.08 : 1;
  if (!vertical_)
    for (int i = 0; i < barCount(); ++i) {
      const double high = std::max(bars_[i].value, bars_[i].high);
      upper = std::max(upper, h - need[i] > 0.25 * h ? high * h / (h - need[i]) : high * 4);
    }
  QVector<bool> inside(barCount(), false);
  QStringList texts;
  for (int i = 0; i < barCount(); ++i) {
    QString t = labelText(i);
    if (vertical_) {
      const double in = bars_[i].value / upper * h, over = h - std::max(bars_[i].value, bars_[i].high) / upper * h;
      inside[i] = need[i] <= in || (need[i] > over && in >= over);
      const double room = inside[i] ? in : over;
      if (need[i] > room) {
        QStringList lines = t.split('\n');
        for (QString& line : lines) line = fm.elidedText(line, Qt::ElideRight, static_cast<int>(std::max(0.0, room - 8.0)));
        t = lines.join('\n');
      }
    }
    texts << t;
  }
  const QColor back = [this] {
    QColor c = palette().color(QPalette::Base);
    c.setAlpha(215);
    return c;
  }();
  for (int i = 0; i < barCount(); ++i) {
    QCPItemText* l = labels_[i];
    l->setText(texts[i]);
    l->setRotation(vertical_ ? -90 : 0);
    l->setTextAlignment(vertical_ ? Qt::AlignLeft : Qt::AlignHCenter);
    l->position->setCoords(i, inside[i] ? 0.0 : std::max(bars_[i].value, bars_[i].high));
    l->setPositionAlignment(vertical_ ? (Qt::AlignLeft | Qt::AlignVCenter) : (Qt::AlignHCenter | Qt::AlignBottom));
    l->setPadding(vertical_ ? QMargins(3, 1, 3, 1) : QMargins(0, 0, 0, 3));
    l->setBrush(inside[i] ? QBrush(back) : Qt::NoBrush);
  }
  plot_->yAxis->setRange(0, upper);
  plot_->replot(QCustomPlot::rpImmediateRefresh);
}

namespace {

// Where a text item is drawn, in its plot's pixels (empty for none).
QRectF text_rect(const QCPItemText* l) {
  if (!l) return {};
  QPolygonF corners;
  for (const QCPItemAnchor* a : {l->topLeft, l->topRight, l->bottomLeft, l->bottomRight}) corners << a->pixelPosition();
  return corners.boundingRect();
}

// A resize of `plot` seen before it lays itself out: its viewport takes the new size at once, so
// that `relayout` places labels against it.
bool resized_first(QCustomPlot* plot, QObject* o, QEvent* e) {
  if (o != plot || e->type() != QEvent::Resize) return false;
  plot->setViewport(QRect(QPoint(0, 0), static_cast<QResizeEvent*>(e)->size()));
  return true;
}

}  // namespace

QRectF RunBarChart::labelRect(int i) const { return text_rect(labels_.value(i)); }

bool RunBarChart::eventFilter(QObject* o, QEvent* e) {
  if (!bars_.isEmpty() && resized_first(plot_, o, e)) layoutLabels();
  return PlotView::eventFilter(o, e);
}

void RunBarChart::resetZoom() { layoutLabels(); }

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
  frontier_ = 0;
  std::vector<const Trace*> traces;
  for (const auto& r : runs) traces.push_back(r.trace.get());
  const auto rel = relate_runs(traces);
  std::vector<std::pair<double, double>> frontier;
  double xmin = 0, xmax = 0, ymin = 0, ymax = 0;
  QVector<QCPItemText*>& labels = names_;
  labels.clear();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Trace& t = *runs[i].trace;
    if (!t.complete) continue;
    const double x = t.median_step_ms(), y = static_cast<double>(t.peak_bytes);
    auto* g = plot_->addGraph();
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(QCPScatterStyle(rel[i].frontier ? QCPScatterStyle::ssDisc : QCPScatterStyle::ssCircle,
                                       policy_color(t.policy), 9));
    g->addData(x, y);
    auto* label = new QCPItemText(plot_);
    label->position->setCoords(x, y);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
    label->setPadding(QMargins(7, 0, 0, 2));
    label->setText(QString("#%1 %2").arg(runs[i].id).arg(QString::fromStdString(t.policy)));
    label->setColor(palette().color(QPalette::Text));
    labels << label;
    if (rel[i].frontier) frontier.push_back({x, y});
    frontier_ += rel[i].frontier ? 1 : 0;
    xmin = points_ ? std::min(xmin, x) : x;
    ymin = points_ ? std::min(ymin, y) : y;
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
  // Around the points (not from 0, which would pile them into a corner), with room on the
  // right for the names.
  const double xpad = std::max((xmax - xmin) * 0.12, xmax * 0.04), ypad = std::max((ymax - ymin) * 0.15, ymax * 0.04);
  x_range_ = {std::max(0.0, xmin - xpad), xmax > 0 ? xmax + xpad + (xmax - xmin) * 0.3 + xmax * 0.05 : 1};
  y_range_ = {std::max(0.0, ymin - ypad), ymax > 0 ? ymax + ypad : 1};
  style_plot(plot_, palette());
  resetZoom();
}

// Each name beside its point on the first side where it overlaps no name placed before and
// stays inside the plot; again whenever the plot's size or range changes.
void FrontierScatter::placeNames() {
  if (names_.isEmpty() || unsized(plot_)) return;
  plot_->replot(QCustomPlot::rpImmediateRefresh);  // the axis rect of the current size
  const QFontMetrics fm(plot_->font());
  const QVector<QCPItemText*>& labels = names_;
  QVector<QRectF> placed;
  // Every point's marker is in the way of the other runs' names (a name over another point
  // reads as that point's).
  QVector<QRectF> markers;
  for (QCPItemText* l : labels) {
    const QPointF p = l->position->pixelPosition();
    markers << QRectF(p - QPointF(5, 5), QSizeF(10, 10));
  }
  const Qt::Alignment sides[] = {Qt::AlignLeft | Qt::AlignBottom, Qt::AlignLeft | Qt::AlignTop,
                                 Qt::AlignRight | Qt::AlignBottom, Qt::AlignRight | Qt::AlignTop};
  for (int i = 0; i < labels.size(); ++i) {
    QCPItemText* l = labels[i];
    const QPointF p = l->position->pixelPosition();
    const QSizeF size(fm.horizontalAdvance(l->text()) + 7, fm.height() + 2);
    for (const Qt::Alignment a : sides) {
      const double left = a & Qt::AlignLeft ? p.x() : p.x() - size.width();
      const double topy = a & Qt::AlignBottom ? p.y() - size.height() : p.y();
      const QRectF r(QPointF(left, topy), size);
      bool free = QRectF(plot_->axisRect()->rect()).contains(r) &&
                  std::none_of(placed.begin(), placed.end(), [&](const QRectF& q) { return q.intersects(r); });
      for (int j = 0; free && j < markers.size(); ++j) free = j == i || !markers[j].intersects(r);
      if (!free && a != sides[3]) continue;
      l->setPositionAlignment(a);
      l->setPadding(a & Qt::AlignLeft ? QMargins(7, 0, 0, 2) : QMargins(0, 0, 7, 2));
      placed << r;
      break;
    }
  }
  plot_->replot();
}

QRectF FrontierScatter::nameRect(int i) const { return text_rect(names_.value(i)); }

QPointF FrontierScatter::pointPixel(int i) const {
  return i >= 0 && i < names_.size() ? names_[i]->position->pixelPosition() : QPointF();
}

bool FrontierScatter::eventFilter(QObject* o, QEvent* e) {
  if (!names_.isEmpty() && resized_first(plot_, o, e)) placeNames();
  return PlotView::eventFilter(o, e);
}

void FrontierScatter::resetZoom() {
  plot_->xAxis->setRange(x_range_.first, x_range_.second);
  plot_->yAxis->setRange(y_range_.first, y_range_.second);
  if (unsized(plot_)) return;
  plot_->replot(QCustomPlot::rpImmediateRefresh);
  placeNames();
}

BudgetFrontierChart::BudgetFrontierChart(QWidget* parent) : PlotView(parent) {
  add_title(plot_, tr("Recompute FLOPs against the activation budget: the least at each budget (line: the "
                      "optimal policy's, else the budget policy's), the runs (points)"));
  plot_->xAxis->setTicker(QSharedPointer<QCPAxisTicker>(new BytesTicker));
  plot_->xAxis->ticker()->setTickCount(4);
  plot_->yAxis->setLabel(tr("recompute GFLOP"));
  plot_->xAxis->setLabel(tr("activation bytes (line: the budget; runs: their activation peak)"));
  plot_->setMinimumHeight(180);
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  style_plot(plot_, palette());
}

void BudgetFrontierChart::setFrontier(const Frontier& f, const std::vector<RunEntry>& runs) {
  plot_->clearPlottables();
  plot_->clearItems();
  run_points_.clear();
  line_points_ = static_cast<int>(f.line.size());
  auto* line = plot_->addGraph();
  QColor c = palette().color(QPalette::Text);
  c.setAlpha(160);
  line->setPen(QPen(c, 1.5));
  line->setLineStyle(QCPGraph::lsStepLeft);  // a budget's cost holds up to the next budget
  line->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, c, 3));  // a line of one budget shows
  double xmax = static_cast<double>(f.store_all_budget), ymax = 0;
  for (const FrontierPoint& p : f.line) {
    line->addData(static_cast<double>(p.budget), static_cast<double>(p.recompute_flops) / 1e9);
    ymax = std::max(ymax, static_cast<double>(p.recompute_flops) / 1e9);
  }
  std::vector<const RunEntry*> shown;  // the run of each point
  for (const RunEntry& r : runs) {
    const Trace& t = *r.trace;
    if (!t.complete) continue;
    shown.push_back(&r);
    const QPointF p(static_cast<double>(t.activation_peak_bytes), static_cast<double>(t.flops.recompute) / 1e9);
    auto* g = plot_->addGraph();
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, policy_color(t.policy), 9));
    g->addData(p.x(), p.y());
    run_points_ << p;
    xmax = std::max(xmax, p.x());
    ymax = std::max(ymax, p.y());
  }
  // Each run's name beside its point, to the left of those in the right third (the budgets near
  // store-all), where the plot would cut it.
  for (int i = 0; i < run_points_.size(); ++i) {
    const RunEntry* r = shown[static_cast<std::size_t>(i)];
    const bool right = run_points_[i].x() > xmax * 0.66;
    auto* label = new QCPItemText(plot_);
    label->position->setCoords(run_points_[i].x(), run_points_[i].y());
    label->setPositionAlignment((right ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignBottom);
    label->setPadding(right ? QMargins(0, 0, 7, 2) : QMargins(7, 0, 0, 2));
    label->setText(QString("#%1 %2").arg(r->id).arg(QString::fromStdString(r->trace->policy)));
    label->setColor(palette().color(QPalette::Text));
  }
  // From a little under 0, so that the points of no recomputation stand clear of the axis.
  x_range_ = {0, xmax > 0 ? xmax * 1.1 : 1};
  y_range_ = {ymax > 0 ? -ymax * 0.06 : -0.06, ymax > 0 ? ymax * 1.15 : 1};
  style_plot(plot_, palette());
  resetZoom();
}

void BudgetFrontierChart::setUnavailable(const QString& why) {
  plot_->clearPlottables();
  plot_->clearItems();
  run_points_.clear();
  line_points_ = 0;
  auto* note = new QCPItemText(plot_);
  note->position->setType(QCPItemPosition::ptAxisRectRatio);
  note->position->setCoords(0.5, 0.5);
  note->setText(why);
  note->setColor(palette().color(QPalette::PlaceholderText));
  resetZoom();
}

QPointF BudgetFrontierChart::linePoint(int i) const {
  if (i < 0 || i >= line_points_ || plot_->graphCount() == 0) return {};
  const auto d = plot_->graph(0)->data();
  return {(d->constBegin() + i)->key, (d->constBegin() + i)->value};
}

QPointF BudgetFrontierChart::runPixel(int i) const {
  if (i < 0 || i >= run_points_.size()) return {};
  return {plot_->xAxis->coordToPixel(run_points_[i].x()), plot_->yAxis->coordToPixel(run_points_[i].y())};
}

void BudgetFrontierChart::resetZoom() {
  plot_->xAxis->setRange(x_range_.first, x_range_.second);
  plot_->yAxis->setRange(y_range_.first, y_range_.second);
  if (unsized(plot_)) return;
  plot_->replot();
}

}  // namespace remat::gui
