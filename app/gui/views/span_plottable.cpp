#include "views/span_plottable.h"

#include <algorithm>
#include <cmath>

namespace remat::gui {

SpanPlottable::SpanPlottable(QCPAxis* keyAxis, QCPAxis* valueAxis) : TimePlottable(keyAxis, valueAxis) {}

void SpanPlottable::setRows(std::shared_ptr<const SpanRows> rows) { rows_ = std::move(rows); }

int SpanPlottable::shownRows() const {
  if (!rows_) return 0;
  return order_.empty() ? static_cast<int>(rows_->rows()) : static_cast<int>(order_.size());
}

int SpanPlottable::rowAtPosition(int p) const {
  if (p < 0 || p >= shownRows()) return -1;
  const int r = order_.empty() ? p : order_[static_cast<std::size_t>(p)];
  return rows_ && r >= 0 && static_cast<std::size_t>(r) < rows_->rows() ? r : -1;
}

int SpanPlottable::positionOf(int row) const {
  if (order_.empty()) return rows_ && row >= 0 && static_cast<std::size_t>(row) < rows_->rows() ? row : -1;
  const auto it = std::find(order_.begin(), order_.end(), row);
  return it == order_.end() ? -1 : static_cast<int>(it - order_.begin());
}

QCPRange SpanPlottable::getKeyRange(bool& found, QCP::SignDomain) const {
  found = rows_ && rows_->size() > 0;
  if (!found) return {};
  return QCPRange(toKey(rows_->min_start()), toKey(rows_->max_end()));
}

QCPRange SpanPlottable::getValueRange(bool& found, QCP::SignDomain, const QCPRange&) const {
  found = shownRows() > 0;
  if (!found) return {};
  return QCPRange(-0.5, static_cast<double>(shownRows()) - 0.5);
}

void SpanPlottable::draw(QCPPainter* painter) {
  drawn_ = 0;
  bars_.clear();
  QCPAxis* k = keyAxis();
  QCPAxis* v = valueAxis();
  if (!rows_ || !k || !v) return;
  const QRect clip = clipRect();
  const double left = clip.left(), right = clip.right() + 1;
  const auto [t0, t1, pixels] = visibleTimes();
  painter->setFont(font_);
  const QFontMetrics fm(font_);
  auto pixel = [&](std::int64_t t) { return k->coordToPixel(toKey(t)); };
  painter->setPen(Qt::NoPen);
  for (int p = 0; p < shownRows(); ++p) {
    const int row = rowAtPosition(p);
    if (row < 0) continue;
    const auto r = static_cast<std::size_t>(row);
    const double y0 = v->coordToPixel(static_cast<double>(p) - height_ / 2);
    const double y1 = v->coordToPixel(static_cast<double>(p) + height_ / 2);
    const double top = std::min(y0, y1), h = std::fabs(y1 - y0);
    if (top > clip.bottom() || top + h < clip.top()) continue;
    const bool text = labeler_ && h >= fm.height() - 2;
    for (const DrawSpan& s : rows_->visible(r, t0, t1, pixels)) {
      double x0 = pixel(s.start), x1 = pixel(s.end);
      if (x1 < x0) std::swap(x0, x1);
      const bool clipped = x0 < left - 1 || x1 > right + 1;
      x0 = std::max(x0, left - 1);
      x1 = std::min(x1, right + 1);
      const QColor c = s.color < colors_.size() ? colors_[s.color] : QColor(Qt::gray);
      const int px0 = static_cast<int>(std::lround(x0)), px1 = static_cast<int>(std::lround(x1));
      if (s.count == 1 && px1 - px0 >= kEdgeMinPx) {
        // Its own edges: the last column stays empty, so the next bar starts after a gap.
        const QRectF bar(px0, top, px1 - px0 - 1, h);
        painter->fillRect(bar, c);
        if (text && bar.width() >= 2.5 * fm.averageCharWidth()) {
          const QString name = fm.elidedText(labeler_(r, s.index), Qt::ElideRight, static_cast<int>(bar.width()) - 4);
          if (!name.isEmpty()) {
            painter->setPen(qGray(c.rgb()) > 140 ? QColor(20, 20, 20) : QColor(250, 250, 250));
            painter->drawText(bar.adjusted(2, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft, name);
            painter->setPen(Qt::NoPen);
          }
        }
      } else {
        if (x1 - x0 < 1.0) x1 = x0 + 1.0;
        painter->fillRect(QRectF(x0, top, x1 - x0, h), c);
      }
      bars_.push_back({r, px0, px1, clipped, s.index, s.count});
      ++drawn_;
    }
  }
  if (sel_t1_ >= sel_t0_) {
    const double a = std::max(pixel(sel_t0_), left), b = std::min(pixel(sel_t1_), right);
    if (b > a) {
      painter->fillRect(QRectF(a, clip.top(), std::max(1.0, b - a), clip.height()), QColor(40, 110, 220, 50));
      painter->setPen(QPen(QColor(40, 110, 220), 1));
      painter->drawLine(QPointF(a, clip.top()), QPointF(a, clip.bottom()));
      painter->drawLine(QPointF(b, clip.top()), QPointF(b, clip.bottom()));
    }
  }
  if (const int hp = positionOf(hl_row_); hl_row_ >= 0 && hp >= 0) {
    const double y0 = v->coordToPixel(hp - height_ / 2 - 0.08), y1 = v->coordToPixel(hp + height_ / 2 + 0.08);
    double a = pixel(hl_start_), b = pixel(hl_end_);
    if (b - a < 3) {  // a sub-pixel slice still gets a visible marker
      const double m = (a + b) / 2;
      a = m - 2;
      b = m + 2;
    }
    painter->setBrush(Qt::NoBrush);
    painter->setPen(QPen(QColor(255, 200, 0), 2));
    painter->drawRect(QRectF(a - 1, std::min(y0, y1), b - a + 1, std::fabs(y1 - y0)));
    painter->setPen(QPen(QColor(20, 20, 20), 1));
    painter->drawRect(QRectF(a - 2, std::min(y0, y1) - 1, b - a + 3, std::fabs(y1 - y0) + 2));
  }
}

void SpanPlottable::drawLegendIcon(QCPPainter* painter, const QRectF& rect) const {
  painter->fillRect(rect, colors_.isEmpty() ? QColor(Qt::gray) : colors_.front());
}

const Span* SpanPlottable::spanAt(const QPointF& pos, int* row) const {
  if (!rows_ || !keyAxis() || !valueAxis()) return nullptr;
  const double rv = valueAxis()->pixelToCoord(pos.y());
  const long p = std::lround(rv);
  const int r = p >= 0 && p < shownRows() ? rowAtPosition(static_cast<int>(p)) : -1;
  if (r < 0 || std::fabs(rv - static_cast<double>(p)) > height_ / 2 + 0.08) return nullptr;
  const std::int64_t t = toTime(keyAxis()->pixelToCoord(pos.x()));
  const std::int64_t slack = std::abs(toTime(keyAxis()->pixelToCoord(pos.x() + 2)) - t);
  if (row) *row = r;
  return rows_->at(static_cast<std::size_t>(r), t, slack);
}

}  // namespace remat::gui
