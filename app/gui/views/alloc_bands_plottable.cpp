#include "views/alloc_bands_plottable.h"

#include <algorithm>
#include <cmath>
#include <QtConcurrent/QtConcurrentRun>

#include "core/analysis/downsample.h"
#include "format.h"
#include "theme.h"
#include "views/run_view_data.h"

namespace remat::gui {

namespace {

// A linear axis as pixel = a + b * coordinate.
struct Linear {
  double a = 0, b = 1;
  Linear(const QCPAxis* axis) {
    const QCPRange r = axis->range();
    const double p0 = axis->coordToPixel(r.lower), p1 = axis->coordToPixel(r.upper);
    b = r.size() > 0 ? (p1 - p0) / r.size() : 0;
    a = p0 - b * r.lower;
  }
  double operator()(double v) const { return a + b * v; }
};

constexpr std::size_t kCachedLayouts = 4;

}  // namespace

AllocBandsPlottable::AllocBandsPlottable(QCPAxis* keyAxis, QCPAxis* valueAxis) : TimePlottable(keyAxis, valueAxis) {
  shown_.fill(true);
  QObject::connect(&relayout_, &QFutureWatcherBase::finished, this, [this] { onRelayout(); });
}

// A layout still being made holds its own references to the bands; its result is dropped.
AllocBandsPlottable::~AllocBandsPlottable() { relayout_.disconnect(); }

void AllocBandsPlottable::setBands(std::shared_ptr<const AllocBands> bands) {
  bands_ = std::move(bands);
  cache_.clear();
  drawn_layout_.reset();
  pinned_ = AllocBands::npos;
  ++generation_;
}

void AllocBandsPlottable::addLayout(std::shared_ptr<const AllocLayout> layout) {
  if (bands_ && layout && layout->shown == shown_) remember(std::move(layout));
}

void AllocBandsPlottable::setShown(const CategorySet& shown) {
  if (shown == shown_) return;
  shown_ = shown;
  cache_.clear();
  drawn_layout_.reset();
  ++generation_;
}

std::uint64_t AllocBandsPlottable::minBytes() const {
  const QCPAxis* v = valueAxis();
  const double px = v && v->axisRect() ? std::max(1, v->axisRect()->height()) : 1;
  return band_threshold(v ? v->range().size() / px : 1);
}

AllocBandsPlottable::LayoutPtr AllocBandsPlottable::cached(std::uint64_t level) const {
  const auto& sizes = bands_->sortedSizes();
  // A layout of another threshold is the same when no allocation lies between the two.
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    const auto [lo, hi] = std::minmax(level, (*it)->min_bytes);
    if (std::lower_bound(sizes.begin(), sizes.end(), lo) == std::lower_bound(sizes.begin(), sizes.end(), hi)) {
      cache_.splice(cache_.begin(), cache_, it);
      return cache_.front();
    }
  }
  return nullptr;
}

AllocBandsPlottable::LayoutPtr AllocBandsPlottable::nearest(std::uint64_t level) const {
  LayoutPtr best;
  double d = 0;
  for (const LayoutPtr& l : cache_) {
    const double e = std::fabs(std::log2(static_cast<double>(std::max<std::uint64_t>(1, l->min_bytes))) -
                               std::log2(static_cast<double>(level)));
    if (!best || e < d) {
      best = l;
      d = e;
    }
  }
  return best;
}

void AllocBandsPlottable::remember(LayoutPtr l) const {
  cache_.push_front(std::move(l));
  if (cache_.size() > kCachedLayouts) cache_.pop_back();
}

const AllocLayout& AllocBandsPlottable::layout() const {
  static const AllocLayout empty;
  if (!bands_) return empty;
  const std::uint64_t level = minBytes();
  if (LayoutPtr l = cached(level)) return *l;
  remember(std::make_shared<const AllocLayout>(layout_bands(*bands_, shown_, level)));
  return *cache_.front();
}

const AllocLayout& AllocBandsPlottable::drawnLayout() const { return drawn_layout_ ? *drawn_layout_ : layout(); }

AllocBandsPlottable::LayoutPtr AllocBandsPlottable::frameLayout() {
  const std::uint64_t level = minBytes();
  if (LayoutPtr l = cached(level)) return l;
  if (background_)
    if (LayoutPtr l = nearest(level)) {
      if (!pending_) startRelayout(level);
      return l;
    }
  layout();
  return cache_.front();
}

void AllocBandsPlottable::startRelayout(std::uint64_t level) {
  pending_ = level;
  pending_generation_ = generation_;
  relayout_.setFuture(QtConcurrent::run([bands = bands_, shown = shown_, level]() -> LayoutPtr {
    try {
      return std::make_shared<const AllocLayout>(layout_bands(*bands, shown, level));
    } catch (...) {
      return nullptr;  // out of memory: the layout drawn stays
    }
  }));
}

void AllocBandsPlottable::onRelayout() {
  LayoutPtr l = relayout_.future().result();
  pending_ = 0;
  if (l && pending_generation_ == generation_) remember(std::move(l));
  // The next replot draws it, or starts the next threshold's when the scale moved on.
  if (parentPlot()) parentPlot()->replot(QCustomPlot::rpQueuedReplot);
}

QCPRange AllocBandsPlottable::getKeyRange(bool& found, QCP::SignDomain) const {
  found = bands_ && !bands_->bands().empty();
  if (!found) return {};
  return QCPRange(toKey(bands_->range().start_ns), toKey(bands_->range().end_ns));
}

QCPRange AllocBandsPlottable::getValueRange(bool& found, QCP::SignDomain, const QCPRange&) const {
  found = false;  // the view fits the byte axis itself
  return {};
}

void AllocBandsPlottable::draw(QCPPainter* painter) {
  drawn_ = 0;
  if (!bands_ || !keyAxis() || !valueAxis()) return;
  drawn_layout_ = frameLayout();
  const AllocLayout& L = *drawn_layout_;
  const auto [t0, t1, pixels] = visibleTimes();
  drawMerged(painter, L, t0, t1, pixels);
  drawBands(painter, L, t0, t1);
}

// The small allocations, one band per category on top of the single ones: the steps kept by the
// downsampling of the stack's top, so its highest point in each column is drawn.
void AllocBandsPlottable::drawMerged(QCPPainter* painter, const AllocLayout& L, std::int64_t t0, std::int64_t t1,
                                     std::size_t pixels) {
  if (L.small_categories.empty() || L.step_x.empty()) return;
  const Linear X(keyAxis()), Y(valueAxis());
  const QRect clip = clipRect();
  const double x_end = std::min(X(toKey(bands_->range().end_ns)), clip.right() + 2.0);
  // The steps kept depend on the time range only: a byte zoom reuses them.
  MergedSteps& m = merged_steps_;
  if (m.layout != drawn_layout_ || m.t0 != t0 || m.t1 != t1 || m.pixels != pixels) {
    m = {drawn_layout_, t0, t1, pixels,
         downsample_indices(L.step_x, L.small_top.back(), static_cast<double>(t0 - L.origin),
                            static_cast<double>(t1 - L.origin), pixels)};
  }
  const std::vector<std::size_t>& idx = m.idx;
  if (idx.empty()) return;
  std::vector<double> xs(idx.size());
  for (std::size_t i = 0; i < idx.size(); ++i)
    xs[i] = std::clamp(X(toKey(L.origin + static_cast<std::int64_t>(L.step_x[idx[i]]))), clip.left() - 2.0, x_end);
  auto y = [&](double bytes) { return std::clamp(Y(bytes), clip.top() - 2.0, clip.bottom() + 2.0); };
  painter->setPen(Qt::NoPen);
  QPolygonF poly;
  for (std::size_t j = 0; j < L.small_categories.size(); ++j) {
    const std::vector<double>& lo = j == 0 ? L.big_top : L.small_top[j - 1];
    const std::vector<double>& hi = L.small_top[j];
    poly.clear();
    for (std::size_t i = 0; i < idx.size(); ++i) {
      const double next = i + 1 < idx.size() ? xs[i + 1] : x_end;
      poly << QPointF(xs[i], y(lo[idx[i]])) << QPointF(next, y(lo[idx[i]]));
    }
    for (std::size_t i = idx.size(); i-- > 0;) {
      const double next = i + 1 < idx.size() ? xs[i + 1] : x_end;
      poly << QPointF(next, y(hi[idx[i]])) << QPointF(xs[i], y(hi[idx[i]]));
    }
    QColor c = category_color(L.small_categories[j]);
    c.setAlpha(150);
    painter->setBrush(c);
    painter->drawPolygon(poly);
    ++drawn_;
  }
}

void AllocBandsPlottable::drawBands(QCPPainter* painter, const AllocLayout& L, std::int64_t t0, std::int64_t t1) {
  const Linear X(keyAxis()), Y(valueAxis());
  const QRect clip = clipRect();
  const double xl = clip.left() - 2.0, xr = clip.right() + 2.0;
  const double yt = clip.top() - 2.0, yb = clip.bottom() + 2.0;
  auto px = [&](std::int64_t t) { return std::clamp(X(toKey(t)), xl, xr); };
  auto py = [&](double bytes) { return std::clamp(Y(bytes), yt, yb); };
  const bool dark = is_dark(parentPlot()->palette());
  // Columns of bands shorter than a pixel: per category the one being grown.
  struct Column {
    bool open = false;
    int x = 0;
    double top = 0, bottom = 0;  // pixels
  };
  std::array<Column, kNumCategories> cols{};
  auto flush = [&](int c) {
    Column& col = cols[static_cast<std::size_t>(c)];
    if (!col.open) return;
    painter->fillRect(QRectF(col.x, col.top, 1.0, std::max(1.0, col.bottom - col.top)), category_color(static_cast<Category>(c)));
    col.open = false;
    ++drawn_;
  };
  const auto& all = bands_->bands();
  const QCPRange shown_bytes = valueAxis()->range();
  std::vector<QPointF> steps;  // (x, bottom in pixels) from x on
  QPolygonF poly;
  // The bands that start before the right edge (t0 never decreases with r).
  const std::size_t end = static_cast<std::size_t>(
      std::lower_bound(L.extents.begin(), L.extents.end(), t1, [](const BandExtent& e, std::int64_t t) { return e.t0 < t; }) -
      L.extents.begin());
  for (std::size_t r = 0; r < end; ++r) {
    if (r % AllocLayout::kBlock == 0) {
      // A whole run of bands ended before the view or out of its byte range: skipped.
      const AllocLayout::Block& blk = L.blocks[r / AllocLayout::kBlock];
      if (blk.t1 <= t0 || blk.lowest > shown_bytes.upper || blk.highest < shown_bytes.lower) {
        r += AllocLayout::kBlock - 1;
        continue;
      }
    }
    const BandExtent& e = L.extents[r];
    if (e.t1 <= t0) continue;
    // A band only drops: above the byte range at its lowest or below it at its highest, it is not seen.
    if (e.lowest > shown_bytes.upper || e.highest + e.bytes < shown_bytes.lower) continue;
    const AllocBand& b = all[L.big[r]];
    const double bytes = e.bytes;
    const BandPoint* first = L.points.data() + L.offsets[r];
    const BandPoint* last = L.points.data() + L.offsets[r + 1];
    const double x0 = px(b.t0), x1 = px(b.t1);
    const int c = static_cast<int>(b.a.category);
    // The breakpoint holding at the left edge, then those inside.
    const BandPoint* p = std::upper_bound(first, last, t0, [](std::int64_t t, const BandPoint& q) { return t < q.t; });
    if (p != first) --p;
    if (x1 - x0 < 1.0) {
      const double top = py(p->y + bytes), bottom = py(p->y);
      if (bottom < yt + 1 || top > yb - 1) continue;
      Column& col = cols[static_cast<std::size_t>(c)];
      const int x = static_cast<int>(std::floor(x0));
      if (col.open && col.x == x && top <= col.bottom + 1 && bottom >= col.top - 1) {
        col.top = std::min(col.top, top);
        col.bottom = std::max(col.bottom, bottom);
      } else {
        flush(c);
        col = {true, x, top, bottom};
      }
      continue;
    }
    steps.clear();
    steps.emplace_back(x0, Y(p->y));
    for (++p; p != last && p->t < t1; ++p) {
      const double x = px(p->t);
      if (std::floor(x) == std::floor(steps.back().x())) steps.back().setY(Y(p->y));
      else steps.emplace_back(x, Y(p->y));
    }
    const double h = Y(bytes) - Y(0);  // negative: up
    double lowest = -1e300, highest = 1e300;
    for (const QPointF& s : steps) {
      lowest = std::max(lowest, s.y());
      highest = std::min(highest, s.y() + h);
    }
    if (lowest < yt || highest > yb) continue;  // above or below the plot
    // Pixels clamped to just outside the plot (a band may reach far beyond a zoomed byte axis).
    auto cy = [&](double y) { return std::clamp(y, yt, yb); };
    poly.clear();
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const double next = i + 1 < steps.size() ? steps[i + 1].x() : x1;
      poly << QPointF(steps[i].x(), cy(steps[i].y())) << QPointF(next, cy(steps[i].y()));
    }
    for (std::size_t i = steps.size(); i-- > 0;) {
      const double next = i + 1 < steps.size() ? steps[i + 1].x() : x1;
      poly << QPointF(next, cy(steps[i].y() + h)) << QPointF(steps[i].x(), cy(steps[i].y() + h));
    }
    const QColor color = category_color(b.a.category);
    painter->setBrush(color);
    // An outline between bands of one category where they are high enough to show it.
    painter->setPen(-h >= 4 ? QPen(color.darker(dark ? 150 : 125), 1) : QPen(Qt::NoPen));
    painter->drawPolygon(poly);
    ++drawn_;
    if (L.big[r] == pinned_) {
      painter->setBrush(Qt::NoBrush);
      painter->setPen(QPen(dark ? Qt::white : Qt::black, 2));
      painter->drawPolygon(poly);
    }
  }
  for (int c = 0; c < kNumCategories; ++c) flush(c);
}

void AllocBandsPlottable::drawLegendIcon(QCPPainter* painter, const QRectF& rect) const {
  painter->fillRect(rect, category_color(Category::SavedActivations));
}

BandHit AllocBandsPlottable::hitAt(const QPointF& pos) const {
  if (!bands_ || !keyAxis() || !valueAxis()) return {};
  const std::int64_t t = toTime(keyAxis()->pixelToCoord(pos.x()));
  const std::int64_t slack = std::abs(toTime(keyAxis()->pixelToCoord(pos.x() + 2)) - t);
  return drawnLayout().at(*bands_, t, valueAxis()->pixelToCoord(pos.y()), slack);
}

QString AllocBandsPlottable::describe(const BandHit& h) const {
  if (!bands_ || h.kind == BandHit::None) return {};
  const QString swatch = QString("<span style='color:%1'>■</span> ").arg(category_color(h.category).name());
  if (h.kind == BandHit::Small)
    return swatch + QObject::tr("<b>small allocations</b> · %1<br>%2 here, each under %3 (merged at this zoom)")
                        .arg(category_name(h.category), human_bytes(h.top - h.bottom),
                             human_bytes(static_cast<double>(drawnLayout().min_bytes)));
  const AllocBand& b = bands_->bands()[h.band];
  const TimelineRange& r = bands_->range();
  auto when = [&](std::int64_t ns, bool before) {
    return before ? QObject::tr("before the step") : human_time_ns(static_cast<double>(ns - timeOrigin()));
  };
  QString s = swatch + "<b>" + QString::fromStdString(bands_->label(b)).toHtmlEscaped() + "</b> · " +
              human_bytes(static_cast<double>(b.a.bytes));
  s += "<br>" + category_name(b.a.category);
  if (b.a.block >= 0) s += QObject::tr(" · block %1").arg(b.a.block);
  s += QObject::tr(" · allocated in %1").arg(phase_name(b.a.phase));
  s += QObject::tr("<br>allocated %1, ").arg(when(b.alloc_ns, b.a.alloc_event < r.first));
  if (b.free_ns < 0) s += QObject::tr("never freed");
  else if (b.a.free_event >= r.end) s += QObject::tr("freed after the step");
  else s += QObject::tr("freed %1 (alive %2)").arg(when(b.free_ns, false), human_time_ns(static_cast<double>(b.free_ns - b.alloc_ns)));
  s += QObject::tr("<br>allocation %1 · stacked at %2 – %3").arg(b.a.id).arg(human_bytes(h.bottom), human_bytes(h.top));
  return s;
}

}  // namespace remat::gui
