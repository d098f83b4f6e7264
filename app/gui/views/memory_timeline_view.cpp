#include "views/memory_timeline_view.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QMouseEvent>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "core/analysis/downsample.h"
#include "format.h"
#include "views/peak_dialog.h"
#include "theme.h"
#include "views/alloc_bands_plottable.h"
#include "views/axis_tickers.h"
#include "views/plot_fit.h"
#include "views/plot_labels.h"

namespace remat::gui {

namespace {

constexpr int kLeftMargin = kTimeAxisLeftMargin, kRightMargin = kTimeAxisRightMargin;
// The factor of one wheel step, as QCustomPlot's own zoom.
constexpr double kWheelZoomFactor = 0.85;

}  // namespace

MemoryTimelineView::MemoryTimelineView(QWidget* parent) : PlotView(parent) {
  setTimeNavigation(true);
  plot_->addLayer("shading", plot_->layer("grid"), QCustomPlot::limBelow);
  plot_->layer("overlay")->setMode(QCPLayer::lmBuffered);
  plot_->xAxis->setTicker(QSharedPointer<QCPAxisTicker>(new TimeTicker(plot_->xAxis)));
  plot_->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new BytesTicker));
  plot_->xAxis->ticker()->setTickCount(8);
  plot_->yAxis->ticker()->setTickCount(5);
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot_->axisRect()->setRangeDrag(Qt::Horizontal);
  plot_->axisRect()->setRangeZoom(Qt::Horizontal);
  plot_->axisRect()->setAutoMargins(QCP::msTop | QCP::msBottom);
  plot_->axisRect()->setMargins(QMargins(kLeftMargin, 0, kRightMargin, 0));
  plot_->yAxis->setPadding(4);
  plot_->legend->setVisible(true);
  plot_->axisRect()->insetLayout()->take(plot_->legend);
  plot_->legend->setFillOrder(QCPLegend::foColumnsFirst);
  // As many columns as the plot's width holds, at most six (views/plot_fit.h).
  connect(plot_, &QCustomPlot::beforeReplot, this,
          [this] { fit_legend_columns(plot_->legend, plot_->viewport().width(), 6); });
  plot_->legend->setIconSize(14, 10);
  plot_->legend->setRowSpacing(0);
  plot_->legend->setColumnSpacing(10);
  plot_->legend->setMargins(QMargins(4, 2, 4, 2));
  QFont lf = font();
  lf.setPointSizeF(lf.pointSizeF() * 0.9);
  plot_->legend->setFont(lf);
  title_element_ = new QCPTextElement(plot_, QString(), QFont(font().family(), -1, QFont::DemiBold));
  title_element_->setMargins(QMargins(kLeftMargin, 4, 0, 0));
  title_element_->setTextFlags(Qt::AlignLeft | Qt::AlignVCenter);
  plot_->setMinimumHeight(160);
  bands_ = new AllocBandsPlottable(plot_->xAxis, plot_->yAxis);
  bands_->removeFromLegend();
  bands_->setVisible(false);
  connect(plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          [this](const QCPRange& r) {
            clampRange(r);
            updateVisible();
          });
  connect(plot_, &QCustomPlot::mouseMove, this, &MemoryTimelineView::onMouseMove);
  connect(plot_, &QCustomPlot::mousePress, this, &MemoryTimelineView::onMousePress);
  connect(plot_, &QCustomPlot::mouseRelease, this, &MemoryTimelineView::onMouseRelease);
  connect(plot_, &QCustomPlot::legendClick, this,
          [this](QCPLegend*, QCPAbstractLegendItem* item, QMouseEvent*) { onLegendClick(item); });
  // The peak's and the prediction's labels inside the axis rect and apart, at every layout
  // (views/plot_labels.h).
  connect(plot_, &QCustomPlot::afterLayout, this, [this] {
    if (!peak_label_ || !peak_graph_ || peak_graph_->data()->isEmpty()) return;
    const auto pk = peak_graph_->data()->constBegin();
    const QPointF point(plot_->xAxis->coordToPixel(pk->key), plot_->yAxis->coordToPixel(pk->value));
    const double line_y = trace_ ? plot_->yAxis->coordToPixel(static_cast<double>(trace_->predicted_peak_bytes)) : 0;
    place_value_labels(peak_label_, point, predicted_label_, line_y, QRectF(plot_->axisRect()->rect()));
  });
  // Above the plot: the mode and the focus on activations.
  focus_bar_ = new QWidget(this);
  auto* bar = new QHBoxLayout(focus_bar_);
  bar->setContentsMargins(kLeftMargin - 4, 2, kRightMargin, 0);
  addModeButtons(bar);
  bar->addSpacing(12);
  activations_only_ = new QToolButton(focus_bar_);
  activations_only_->setText(tr("Activations only"));
  activations_only_->setCheckable(true);
  activations_only_->setToolTip(tr("Hide parameters, gradients, master weights and optimizer state and fit the "
                                   "byte axis to the rest. Click a legend item to hide or show its category; "
                                   "wheel over the byte axis (or Ctrl+wheel) to zoom bytes."));
  bar->addWidget(activations_only_);
  bar->addSpacing(12);
  peak_button_ = new QToolButton(focus_bar_);
  peak_button_->setText(tr("Alive at the peak…"));
  peak_button_->setToolTip(tr("Every tensor alive at the peak instant, with its bytes, category, block and why it "
                              "is kept (or click the peak's marker)."));
  bar->addWidget(peak_button_);
  connect(peak_button_, &QToolButton::clicked, this, [this] { showPeakAlive(); });
  bar->addStretch(1);
  // The clicked allocation's details on a line of their own under the buttons, wrapped at
  // spaces, so that they are never cut; hidden while nothing is clicked.
  pinned_ = new QLabel(this);
  pinned_->setTextFormat(Qt::RichText);
  pinned_->setWordWrap(true);
  pinned_->setContentsMargins(kLeftMargin - 4, 0, kRightMargin, 0);
  pinned_->setVisible(false);
  focus_bar_->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
  static_cast<QVBoxLayout*>(layout())->insertWidget(0, focus_bar_, 0);
  static_cast<QVBoxLayout*>(layout())->insertWidget(1, pinned_, 0);
  static_cast<QVBoxLayout*>(layout())->setStretchFactor(plot_, 1);
  connect(activations_only_, &QToolButton::toggled, this, [this](bool on) { setActivationsOnly(on); });
  rebuild();
}

MemoryTimelineView::~MemoryTimelineView() = default;

void MemoryTimelineView::setTrace(std::shared_ptr<const Trace> t, const QString& title) {
  auto d = t ? std::make_shared<const MemoryViewData>(memory_view_data(*t)) : nullptr;
  setData(std::move(t), std::move(d), title);
}

void MemoryTimelineView::setData(std::shared_ptr<const Trace> t, std::shared_ptr<const MemoryViewData> d,
                                 const QString& title, std::shared_ptr<const AllocBands> bands,
                                 std::shared_ptr<const AllocLayout> layout) {
  static const auto empty = std::make_shared<const MemoryViewData>();
  if (t != trace_) shown_ = all_categories();
  trace_ = std::move(t);
  d_ = trace_ && d ? std::move(d) : empty;
  title_ = title;
  cum_.reset();
  origin_ = d_->origin;
  duration_ = d_->duration;
  bands_->setShown(shown_);  // before the layout, which is of every category
  bands_->setBands(trace_ ? std::move(bands) : nullptr);
  if (layout && bands_->bands()) bands_->addLayout(std::move(layout));
  pinned_->clear();
  pinned_->setVisible(false);
  if (trace_) {
    restack();
    if (memory_mode_ == MemoryMode::Allocations) showAllocations();
  }
  rebuild();
}

// The stack of the shown categories: built with the data when every one is shown.
void MemoryTimelineView::restack() {
  if (shows_all(shown_)) cum_ = std::shared_ptr<const Stack>(d_, &d_->stack_all);
  else cum_ = std::make_shared<const Stack>(stack_categories(*d_, shown_));
}

void MemoryTimelineView::setTimeMode(TimeMode m) {
  if (m == mode_) return;
  mode_ = m;
  plot_->xAxis->setTicker(m == TimeMode::Absolute ? QSharedPointer<QCPAxisTicker>(new TimeTicker(plot_->xAxis))
                                                  : QSharedPointer<QCPAxisTicker>(new FractionTicker));
  rebuild();
}

void MemoryTimelineView::setCompact(bool compact) {
  compact_ = compact;
  rebuild();
}

void MemoryTimelineView::setValueMax(double v) {
  value_max_ = v;
  plot_->yAxis->setRange(0, fittedValueMax());
  plot_->replot();
}

double MemoryTimelineView::timeScale() const {
  return mode_ == TimeMode::Absolute ? 1.0 : 1.0 / static_cast<double>(duration_);
}

double MemoryTimelineView::dataValueMax() const {
  return trace_ ? memory_value_max(*d_, *trace_) : 1024.0;
}

QCPRange MemoryTimelineView::dataTimeRange() const {
  if (d_->x.empty()) return QCPRange(0, std::max(extent_, 1.0));
  const double s = timeScale();
  const double hi = std::max(d_->x.back(), static_cast<double>(duration_));
  return QCPRange(0, std::max({hi * s, extent_, 1e-9}));
}

void MemoryTimelineView::resetZoom() {
  plot_->yAxis->setRange(0, fittedValueMax());
  plot_->xAxis->setRange(dataTimeRange());
  plot_->replot();
}

void MemoryTimelineView::rebuild() {
  plot_->clearGraphs();
  plot_->clearItems();
  stack_.clear();
  shading_.clear();
  total_graph_ = host_graph_ = reserved_graph_ = peak_graph_ = nullptr;
  peak_label_ = predicted_label_ = nullptr;
  predicted_ = nullptr;

  // Layout: title, legend, plot.
  QCPLayoutGrid* L = plot_->plotLayout();
  if (title_element_->layout() == L) L->take(title_element_);
  if (plot_->legend->layout() == L) L->take(plot_->legend);
  L->simplify();
  int row = 0;
  title_element_->setText(title_);
  title_element_->setVisible(!title_.isEmpty());
  if (!title_.isEmpty()) {
    L->insertRow(row);
    L->addElement(row++, 0, title_element_);
  }
  plot_->legend->setVisible(!compact_);
  if (!compact_) {
    L->insertRow(row);
    L->addElement(row++, 0, plot_->legend);
  }
  for (int r = 0; r < row; ++r) L->setRowStretchFactor(r, 0.001);
  L->setRowSpacing(0);
  plot_->yAxis->setLabel(compact_ ? QString() : tr("live bytes"));

  bands_->setTimeMapping(origin_, timeScale());
  cursor_ = new QCPItemStraightLine(plot_);
  cursor_->setLayer("overlay");
  cursor_->setVisible(false);
  cursor_->setSelectable(false);

  if (trace_ && !d_->x.empty()) {
    const bool dark = is_dark(palette());
    for (std::size_t k = 0; k < d_->stacked.size(); ++k) {
      QCPGraph* g = plot_->addGraph();
      g->setName(category_name(d_->stacked[k]));
      g->setLineStyle(QCPGraph::lsStepLeft);
      g->setAntialiased(false);
      g->setAntialiasedFill(false);
      stack_.push_back(g);
    }
    total_graph_ = plot_->addGraph();
    total_graph_->setName(tr("device total"));
    total_graph_->setLineStyle(QCPGraph::lsStepLeft);
    total_graph_->setAntialiased(false);
    if (d_->host_max > 0) {
      host_graph_ = plot_->addGraph();
      host_graph_->setName(tr("host (offloaded)"));
      host_graph_->setLineStyle(QCPGraph::lsStepLeft);
      host_graph_->setAntialiased(false);
    }
    if (trace_->device.rfind("cuda", 0) == 0 && d_->reserved_max > 0) {
      reserved_graph_ = plot_->addGraph();
      reserved_graph_->setName(tr("reserved"));
      reserved_graph_->setLineStyle(QCPGraph::lsStepLeft);
      reserved_graph_->setAntialiased(false);
    }
    // Phase shading and its legend entries.
    const double s = timeScale();
    std::array<bool, kNumPhases> seen{};
    for (const PhaseSpan& p : d_->phases) {
      auto* r = new QCPItemRect(plot_);
      r->setLayer("shading");
      r->setSelectable(false);
      r->setClipToAxisRect(true);
      r->topLeft->setTypeX(QCPItemPosition::ptPlotCoords);
      r->topLeft->setTypeY(QCPItemPosition::ptAxisRectRatio);
      r->bottomRight->setTypeX(QCPItemPosition::ptPlotCoords);
      r->bottomRight->setTypeY(QCPItemPosition::ptAxisRectRatio);
      r->setAntialiased(false);
      r->setPen(Qt::NoPen);
      shading_.push_back(r);
      r->setBrush(phase_shade(p.phase, dark));
      seen[static_cast<int>(p.phase)] = true;
    }
    if (!compact_)
      for (int ph = 0; ph < kNumPhases; ++ph) {
        if (!seen[ph]) continue;
        QCPGraph* g = plot_->addGraph();
        QColor c = phase_color(static_cast<Phase>(ph));
        c.setAlpha(90);
        g->setName(phase_name(static_cast<Phase>(ph)));
        g->setPen(Qt::NoPen);
        g->setBrush(c);
      }
    // The peak.
    const std::size_t pk = d_->tl.peak_point;
    peak_graph_ = plot_->addGraph();
    peak_graph_->removeFromLegend();
    peak_graph_->setLineStyle(QCPGraph::lsNone);
    peak_graph_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QColor(0xd6, 0x27, 0x28), Qt::white, 8));
    peak_graph_->addData(d_->x[pk] * s, d_->total[pk]);
    peak_label_ = new QCPItemText(plot_);
    peak_label_->setLayer("axes");  // over the curves when it has to sit below the point
    peak_label_->setClipToAxisRect(true);
    peak_label_->position->setCoords(d_->x[pk] * s, d_->total[pk]);
    peak_label_->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
    peak_label_->setPadding(QMargins(6, 0, 0, 3));
    QFont bf = font();
    bf.setBold(true);
    peak_label_->setFont(bf);
    peak_label_->setColor(QColor(0xd6, 0x27, 0x28));
    if (trace_->predicted_peak_bytes > 0) {
      const double pred = static_cast<double>(trace_->predicted_peak_bytes);
      predicted_ = new QCPItemStraightLine(plot_);
      predicted_->setLayer("main");
      predicted_->point1->setCoords(0, pred);
      predicted_->point2->setCoords(1, pred);
      predicted_label_ = new QCPItemText(plot_);
      predicted_label_->setLayer("axes");
      predicted_label_->position->setTypeX(QCPItemPosition::ptAxisRectRatio);
      predicted_label_->position->setTypeY(QCPItemPosition::ptPlotCoords);
      predicted_label_->position->setCoords(1.0, pred);
      predicted_label_->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
      predicted_label_->setPadding(QMargins(0, 0, 4, 2));
      predicted_label_->setText(tr("predicted %1").arg(human_bytes(pred)));
      predicted_label_->setClipToAxisRect(true);
    }
  }
  style_plot(plot_, palette());
  onRestyle();
  drawMark();
  focus_bar_->setVisible(!compact_);
  peak_button_->setEnabled(trace_ && !d_->x.empty());
  clamping_ = true;
  plot_->xAxis->setRange(dataTimeRange());
  clamping_ = false;
  applyFocus();
}

void MemoryTimelineView::onRestyle() {
  const QColor fg = palette().color(QPalette::Text);
  if (total_graph_) total_graph_->setPen(QPen(fg, 1));
  if (reserved_graph_) {
    QColor c = fg;
    c.setAlpha(170);
    reserved_graph_->setPen(QPen(c, 1, Qt::DotLine));
  }
  QColor mid = fg;
  mid.setAlpha(150);
  if (predicted_) predicted_->setPen(QPen(mid, 1, Qt::DashLine));
  if (predicted_label_) predicted_label_->setColor(mid);
  if (cursor_) cursor_->setPen(QPen(mid, 1));
  title_element_->setTextColor(fg);
  // Hidden categories: a grey legend item (its graph is not drawn, only its icon).
  const bool dark = is_dark(palette());
  const QColor grey = palette().color(QPalette::Disabled, QPalette::Text);
  auto legend = [this, &grey](QCPGraph* g, Category c) {
    if (auto* item = g ? plot_->legend->itemWithPlottable(g) : nullptr)
      item->setTextColor(shown_[static_cast<int>(c)] ? palette().color(QPalette::Text) : grey);
  };
  for (std::size_t k = 0; k < stack_.size(); ++k) {
    const bool on = shown_[static_cast<int>(d_->stacked[k])];
    const QColor c = on ? category_color(d_->stacked[k]) : grey.lighter(dark ? 80 : 130);
    stack_[k]->setPen(QPen(on ? c.darker(dark ? 140 : 118) : grey, 1));
    stack_[k]->setBrush(c);
    legend(stack_[k], d_->stacked[k]);
  }
  // The lines that count every device category are not drawn while one is hidden.
  for (QCPGraph* g : {total_graph_, reserved_graph_})
    if (auto* item = g ? plot_->legend->itemWithPlottable(g) : nullptr)
      item->setTextColor(wholeDevice() ? palette().color(QPalette::Text) : grey);
  if (host_graph_) {
    const bool on = shown_[static_cast<int>(Category::HostOffloaded)];
    host_graph_->setPen(QPen(on ? category_color(Category::HostOffloaded) : grey, 2, Qt::DashLine));
    legend(host_graph_, Category::HostOffloaded);
  }
}

void MemoryTimelineView::clampRange(const QCPRange& r) {
  if (clamping_ || d_->x.empty()) return;
  const QCPRange d = dataTimeRange();
  QCPRange n = r;
  const double min_size = 50.0 * timeScale();
  if (n.size() > d.size()) n = d;
  if (n.size() < min_size) n = QCPRange(n.center() - min_size / 2, n.center() + min_size / 2);
  if (n.lower < d.lower) n = QCPRange(d.lower, d.lower + n.size());
  if (n.upper > d.upper) n = QCPRange(d.upper - n.size(), d.upper);
  if (n.lower != r.lower || n.upper != r.upper) {
    clamping_ = true;
    plot_->xAxis->setRange(n);
    clamping_ = false;
  }
}

void MemoryTimelineView::updateVisible() {
  if (d_->x.empty() || !total_graph_) return;
  const QCPRange r = plot_->xAxis->range();
  const double s = timeScale();
  const int width = std::max(200, plot_->axisRect()->width() > 0 ? plot_->axisRect()->width() : plot_->width());
  const std::vector<std::size_t> idx = downsample_indices(d_->x, d_->total, r.lower / s, r.upper / s, static_cast<std::size_t>(width));
  QVector<double> keys(static_cast<int>(idx.size())), vals(static_cast<int>(idx.size()));
  for (std::size_t i = 0; i < idx.size(); ++i) keys[static_cast<int>(i)] = d_->x[idx[i]] * s;
  auto fill = [&](QCPGraph* g, const std::vector<double>& src) {
    for (std::size_t i = 0; i < idx.size(); ++i) vals[static_cast<int>(i)] = src[idx[i]];
    g->setData(keys, vals, true);
  };
  for (std::size_t k = 0; k < stack_.size() && cum_; ++k) fill(stack_[k], (*cum_)[k]);
  // Phase shading only over the visible range: huge off-screen rectangles are slow to clip.
  for (std::size_t i = 0; i < shading_.size() && i < d_->phases.size(); ++i) {
    const double a = std::max(r.lower, static_cast<double>(d_->phases[i].start_ns - origin_) * s);
    const double b = std::min(r.upper, static_cast<double>(d_->phases[i].end_ns - origin_) * s);
    shading_[i]->setVisible(b > a);
    shading_[i]->topLeft->setCoords(a, 0);
    shading_[i]->bottomRight->setCoords(std::max(a, b), 1);
  }
  fill(total_graph_, d_->total);
  if (host_graph_) fill(host_graph_, d_->host);
  if (reserved_graph_) fill(reserved_graph_, d_->reserved);
}

double MemoryTimelineView::plottedMaximum() const {
  double m = 0;
  if (!total_graph_) return m;
  for (auto it = total_graph_->data()->constBegin(); it != total_graph_->data()->constEnd(); ++it)
    m = std::max(m, it->value);
  return m;
}

QRect MemoryTimelineView::plotArea() const {
  QRect r = plot_->axisRect()->rect();
  return QRect(plot_->mapTo(this, r.topLeft()), r.size());
}

std::size_t MemoryTimelineView::pointAt(double key) const {
  const double x = key / timeScale();
  auto it = std::upper_bound(d_->x.begin(), d_->x.end(), x);
  return it == d_->x.begin() ? 0 : static_cast<std::size_t>(it - d_->x.begin()) - 1;
}

std::size_t MemoryTimelineView::eventAt(std::size_t point) const {
  const TimelinePoint& p = d_->tl.points[point];
  if (p.event >= 0) return static_cast<std::size_t>(p.event);
  if (point == 0) return d_->tl.range.first > 0 ? d_->tl.range.first - 1 : SIZE_MAX;
  return d_->tl.range.end > 0 ? d_->tl.range.end - 1 : SIZE_MAX;
}

std::vector<const Allocation*> MemoryTimelineView::largestAt(double key, std::size_t n) const {
  if (d_->x.empty()) return {};
  const std::size_t ev = eventAt(pointAt(key));
  if (ev == SIZE_MAX) return {};
  return largest_shown(d_->live, ev, n, shown_);
}

QList<QPair<int, QString>> MemoryTimelineView::tensorsAt(double key, int n) const {
  QList<QPair<int, QString>> out;
  for (const Allocation* a : largestAt(key, static_cast<std::size_t>(n)))
    out.append({a->block, QString::fromStdString(d_->live.tensor_name(*a))});
  return out;
}

QString MemoryTimelineView::describeAt(double key) const {
  if (d_->x.empty()) return {};
  const std::size_t i = pointAt(key);
  const TimelinePoint& p = d_->tl.points[i];
  const std::int64_t t = origin_ + static_cast<std::int64_t>(key / timeScale());
  QString phase;
  for (const PhaseSpan& s : d_->phases)
    if (s.start_ns <= t && t < s.end_ns) phase = phase_name(s.phase);
  QString h = "<b>" + human_time_ns(static_cast<double>(t - origin_)) + "</b>";
  if (mode_ == TimeMode::Normalized) h += QString(" (%1 % of the step)").arg(key * 100.0, 0, 'f', 1);
  if (!phase.isEmpty()) h += " · " + phase;
  h += "<br>device <b>" + human_bytes(static_cast<double>(p.device)) + "</b>";
  if (reserved_graph_) h += ", reserved " + human_bytes(d_->reserved[i]);
  if (p.host) h += ", host " + human_bytes(static_cast<double>(p.host));
  h += "<table cellspacing=0 cellpadding=1>";
  if (!shows_all(shown_)) {
    std::int64_t sum = 0;
    for (int c = 0; c < kNumCategories; ++c)
      if (shown_[c] && static_cast<Category>(c) != Category::HostOffloaded) sum += p.live[c];
    h += "<br>shown categories <b>" + human_bytes(static_cast<double>(sum)) + "</b>";
  }
  for (int c = kNumCategories - 1; c >= 0; --c) {
    if (!p.live[c] || !shown_[c]) continue;
    h += QString("<tr><td><span style='color:%1'>■</span> %2</td><td align=right>&nbsp;%3</td></tr>")
             .arg(category_color(static_cast<Category>(c)).name(), category_name(static_cast<Category>(c)),
                  human_bytes(static_cast<double>(p.live[c])));
  }
  h += "</table>";
  const auto largest = largestAt(key, 5);
  if (!largest.empty()) {
    h += "<b>largest alive</b><table cellspacing=0 cellpadding=1>";
    for (const Allocation* a : largest)
      h += QString("<tr><td>%1</td><td align=right>&nbsp;%2</td></tr>")
               .arg(QString::fromStdString(d_->live.label(*a)).toHtmlEscaped(), human_bytes(static_cast<double>(a->bytes)));
    h += "</table><i>click to select them in the ledger</i>";
  }
  return h;
}

void MemoryTimelineView::setCursorKey(double key) {
  if (!cursor_) return;
  if (std::isnan(key)) {
    cursor_->setVisible(false);
  } else {
    cursor_->point1->setCoords(key, 0);
    cursor_->point2->setCoords(key, 1);
    cursor_->setVisible(true);
  }
  plot_->layer("overlay")->replot();
}

bool MemoryTimelineView::cursorShown() const { return cursor_ && cursor_->visible(); }

void MemoryTimelineView::onMouseMove(QMouseEvent* e) {
  if (d_->x.empty()) return;
  if (e->buttons() != Qt::NoButton) {
    QToolTip::hideText();
    return;
  }
  if (!plot_->axisRect()->rect().contains(e->pos())) {
    setCursorKey(std::nan(""));
    QToolTip::hideText();
    emit cursorMoved(std::nan(""));
    return;
  }
  const double key = plot_->xAxis->pixelToCoord(e->position().x());
  setCursorKey(key);
  emit cursorMoved(key);
  QString text = describeAt(key);
  if (memory_mode_ == MemoryMode::Allocations) {
    const QString band = describeAllocationAt(e->position());
    if (!band.isEmpty()) text = band + "<hr>" + text;
  }
  QToolTip::showText(e->globalPosition().toPoint() + QPoint(14, 10), text, plot_);
}

void MemoryTimelineView::onMousePress(QMouseEvent* e) { press_pos_ = e->pos(); }

void MemoryTimelineView::onMouseRelease(QMouseEvent* e) {
  if (d_->x.empty() || e->button() != Qt::LeftButton) return;
  if ((e->pos() - press_pos_).manhattanLength() > 4) return;
  if (!plot_->axisRect()->rect().contains(e->pos())) return;
  if (onPeak(e->position())) {
    showPeakAlive();
    return;
  }
  if (memory_mode_ == MemoryMode::Allocations) return pinAllocationAt(e->position());
  const double key = plot_->xAxis->pixelToCoord(e->position().x());
  emit tensorsPicked(tensorsAt(key, 8), origin_ + static_cast<qint64>(key / timeScale()));
}

bool MemoryTimelineView::onPeak(const QPointF& pos) const {
  if (!peak_graph_ || peak_graph_->data()->isEmpty() || !peak_graph_->visible()) return false;
  const auto pk = peak_graph_->data()->constBegin();
  const QPointF point(plot_->xAxis->coordToPixel(pk->key), plot_->yAxis->coordToPixel(pk->value));
  if (QLineF(point, pos).length() <= 8) return true;
  if (!peak_label_ || !peak_label_->visible()) return false;
  const double d = peak_label_->selectTest(pos, false);  // the distance from its box; -1: no hit
  return d >= 0 && d <= 1;
}

PeakAliveDialog* MemoryTimelineView::showPeakAlive() {
  if (!trace_) return nullptr;
  auto* d = new PeakAliveDialog(*trace_, origin_, this);
  d->setAttribute(Qt::WA_DeleteOnClose);
  d->show();
  return d;
}

QCPGraph* MemoryTimelineView::categoryGraph(Category c) const {
  if (c == Category::HostOffloaded) return host_graph_;
  for (std::size_t k = 0; k < stack_.size(); ++k)
    if (d_->stacked[k] == c) return stack_[k];
  return nullptr;
}

QCPAbstractLegendItem* MemoryTimelineView::legendItem(Category c) const {
  QCPGraph* g = categoryGraph(c);
  return g && !compact_ ? plot_->legend->itemWithPlottable(g) : nullptr;
}

bool MemoryTimelineView::wholeDevice() const {
  for (int c = 0; c < kNumCategories; ++c)
    if (!shown_[c] && static_cast<Category>(c) != Category::HostOffloaded) return false;
  return true;
}

double MemoryTimelineView::fittedValueMax() const {
  if (value_max_ > 0) return value_max_;
  if (shows_all(shown_)) return dataValueMax();
  double top = fitted_value_top(d_->tl, shown_);
  // The device total, the reserved bytes and the prediction are drawn only over the whole device.
  if (wholeDevice() && trace_)
    top = std::max({top, kValueHeadroom * d_->reserved_max, kValueHeadroom * static_cast<double>(trace_->predicted_peak_bytes)});
  return top;
}

void MemoryTimelineView::applyFocus() {
  restack();
  const bool stacked = memory_mode_ == MemoryMode::Stacked;
  bands_->setShown(shown_);
  bands_->setVisible(!stacked);
  for (std::size_t k = 0; k < stack_.size(); ++k) {
    stack_[k]->setVisible(stacked && shown_[static_cast<int>(d_->stacked[k])]);
    // Filled down to the shown category below (the axis for the lowest).
    QCPGraph* below = nullptr;
    for (std::size_t j = k; j-- > 0;)
      if (stack_[j]->visible()) {
        below = stack_[j];
        break;
      }
    stack_[k]->setChannelFillGraph(below);
  }
  if (host_graph_) host_graph_->setVisible(shown_[static_cast<int>(Category::HostOffloaded)]);
  const bool whole = wholeDevice();
  if (total_graph_) total_graph_->setVisible(whole);
  if (reserved_graph_) reserved_graph_->setVisible(whole);
  if (predicted_) predicted_->setVisible(whole);
  if (predicted_label_) predicted_label_->setVisible(whole);
  // The peak of what is stacked: the device's, or the shown categories' own.
  if (peak_graph_ && !d_->x.empty()) {
    const StackPeak sp = whole ? StackPeak{} : stacked_peak(d_->tl, shown_);  // the device's is known
    const std::size_t pk = whole ? d_->tl.peak_point : sp.point;
    const double key = d_->x[pk] * timeScale(), value = whole ? d_->total[pk] : static_cast<double>(sp.bytes);
    peak_graph_->data()->clear();
    peak_graph_->addData(key, value);
    peak_graph_->setVisible(value > 0);
    peak_label_->position->setCoords(key, value);
    peak_label_->setText(whole ? tr("peak %1").arg(human_bytes(value))
                               : tr("peak of the shown %1").arg(human_bytes(value)));
    peak_label_->setVisible(value > 0);
  }
  if (activations_only_) {
    QSignalBlocker block(activations_only_);
    activations_only_->setChecked(shown_ == activations_only());
  }
  onRestyle();
  plot_->yAxis->setRange(0, fittedValueMax());
  updateVisible();
  plot_->replot();
}

void MemoryTimelineView::setShownCategories(const CategorySet& shown) {
  if (shown == shown_) return;
  shown_ = shown;
  applyFocus();
}

void MemoryTimelineView::setCategoryShown(Category c, bool shown) {
  CategorySet s = shown_;
  s[static_cast<int>(c)] = shown;
  setShownCategories(s);
}

void MemoryTimelineView::setActivationsOnly(bool on) { setShownCategories(on ? activations_only() : all_categories()); }

void MemoryTimelineView::onLegendClick(QCPAbstractLegendItem* item) {
  auto* pi = qobject_cast<QCPPlottableLegendItem*>(item);
  if (!pi) return;
  for (int c = 0; c < kNumCategories; ++c) {
    const Category cat = static_cast<Category>(c);
    if (categoryGraph(cat) == pi->plottable()) {
      setCategoryShown(cat, !shown_[c]);
      return;
    }
  }
}

void MemoryTimelineView::zoomValue(double steps, double at) {
  const double top = fittedValueMax();
  const QCPRange r = plot_->yAxis->range();
  const double f = std::pow(kWheelZoomFactor, steps);
  double lo = at + (r.lower - at) * f, hi = at + (r.upper - at) * f;
  // Within [0, the fitted top], and never narrower than a few bytes.
  const double size = std::clamp(hi - lo, 16.0, top);
  lo = std::clamp(lo, 0.0, top - size);
  plot_->yAxis->setRange(lo, lo + size);
  plot_->replot();
}

bool MemoryTimelineView::eventFilter(QObject* o, QEvent* e) {
  if (o == plot_ && e->type() == QEvent::Leave) {
    // The crosshair and the hover belong to the mouse: gone when it leaves the plot.
    setCursorKey(std::nan(""));
    QToolTip::hideText();
    emit cursorMoved(std::nan(""));
  }
  if (o == plot_ && e->type() == QEvent::Wheel) {
    auto* we = static_cast<QWheelEvent*>(e);
    const QRect ar = plot_->axisRect()->rect();
    const QPointF p = we->position();
    const bool over_axis = p.x() < ar.left() && p.y() >= ar.top() && p.y() <= ar.bottom();
    if (over_axis || we->modifiers().testFlag(Qt::ControlModifier)) {
      PlotView::eventFilter(o, e);  // the plot is the one last used
      zoomValue(we->angleDelta().y() / 120.0, plot_->yAxis->pixelToCoord(p.y()));
      we->accept();
      return true;
    }
  }
  return PlotView::eventFilter(o, e);
}

}  // namespace remat::gui
