#include "views/span_plottable.h"

#include <cmath>

namespace remat::gui {

SpanPlottable::SpanPlottable(QCPAxis* keyAxis, QCPAxis* valueAxis) : QCPAbstractPlottable(keyAxis, valueAxis) {
  setAntialiased(false);
  setAntialiasedFill(false);
  setSelectable(QCP::stNone);
}

void SpanPlottable::setRows(std::shared_ptr<const SpanRows> rows) { rows_ = std::move(rows); }

double SpanPlottable::selectTest(const QPointF&, bool, QVariant*) const { return -1; }

QCPRange SpanPlottable::getKeyRange(bool& found, QCP::SignDomain) const {
  found = rows_ && rows_->size() > 0;
  if (!found) return {};
  return QCPRange(toKey(rows_->min_start()), toKey(rows_->max_end()));
}

QCPRange SpanPlottable::getValueRange(bool& found, QCP::SignDomain, const QCPRange&) const {
  found = rows_ && rows_->rows() > 0;
  if (!found) return {};
  return QCPRange(-0.5, static_cast<double>(rows_->rows()) - 0.5);
}

void SpanPlottable::draw(QCPPainter* painter) {
  drawn_ = 0;
  QCPAxis* k = keyAxis();
  QCPAxis* v = valueAxis();
  if (!rows_ || !k || !v) return;
  const QRect clip = clipRect();
  const double left = clip.left(), right = clip.right() + 1;
  const std::size_t pixels = static_cast<std::size_t>(std::max(1.0, right - left));
  double k0 = k->pixelToCoord(left), k1 = k->pixelToCoord(right);
  if (k0 > k1) std::swap(k0, k1);
  const std::int64_t t0 = toTime(k0), t1 = toTime(k1) + 1;
  painter->setPen(Qt::NoPen);
  for (std::size_t r = 0; r < rows_->rows(); ++r) {
    const double y0 = v->coordToPixel(static_cast<double>(r) - height_ / 2);
    const double y1 = v->coordToPixel(static_cast<double>(r) + height_ / 2);
    const double top = std::min(y0, y1), h = std::fabs(y1 - y0);
    if (top > clip.bottom() || top + h < clip.top()) continue;
    for (const DrawSpan& s : rows_->visible(r, t0, t1, pixels)) {
      double x0 = k->coordToPixel(toKey(s.start)), x1 = k->coordToPixel(toKey(s.end));
      if (x1 < x0) std::swap(x0, x1);
      x0 = std::max(x0, left - 1);
      x1 = std::min(x1, right + 1);
      if (x1 - x0 < 1.0) x1 = x0 + 1.0;
      const QColor c = s.color < colors_.size() ? colors_[s.color] : QColor(Qt::gray);
      painter->fillRect(QRectF(x0, top, x1 - x0, h), c);
      ++drawn_;
    }
  }
}

void SpanPlottable::drawLegendIcon(QCPPainter* painter, const QRectF& rect) const {
  painter->fillRect(rect, colors_.isEmpty() ? QColor(Qt::gray) : colors_.front());
}

const Span* SpanPlottable::spanAt(const QPointF& pos, int* row) const {
  if (!rows_ || !keyAxis() || !valueAxis()) return nullptr;
  const double rv = valueAxis()->pixelToCoord(pos.y());
  const long r = std::lround(rv);
  if (r < 0 || static_cast<std::size_t>(r) >= rows_->rows() || std::fabs(rv - static_cast<double>(r)) > height_ / 2 + 0.08)
    return nullptr;
  const std::int64_t t = toTime(keyAxis()->pixelToCoord(pos.x()));
  const std::int64_t slack = std::abs(toTime(keyAxis()->pixelToCoord(pos.x() + 2)) - t);
  if (row) *row = static_cast<int>(r);
  return rows_->at(static_cast<std::size_t>(r), t, slack);
}

}  // namespace remat::gui
