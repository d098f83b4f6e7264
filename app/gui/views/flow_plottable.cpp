#include "views/flow_plottable.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace remat::gui {

FlowPlottable::FlowPlottable(QCPAxis* keyAxis, QCPAxis* valueAxis) : TimePlottable(keyAxis, valueAxis) {}

QCPRange FlowPlottable::getKeyRange(bool& found, QCP::SignDomain) const {
  found = false;  // the bars give the range
  return {};
}

QCPRange FlowPlottable::getValueRange(bool& found, QCP::SignDomain, const QCPRange&) const {
  found = false;
  return {};
}

void FlowPlottable::draw(QCPPainter* painter) {
  drawn_ = 0;
  lines_ = 0;
  QCPAxis* k = keyAxis();
  QCPAxis* v = valueAxis();
  if (!links_ || !row_of_ || !k || !v) return;
  const auto [t0, t1, pixels] = visibleTimes();
  (void)pixels;
  // Where the arrows are denser than the pixels, arrows between the same pixels are one line:
  // each kept once, by its ends' rows and pixel columns.
  struct Line {
    QPointF p, q;
  };
  std::vector<Line> lines;
  std::vector<std::uint64_t> seen;
  for (const Flow* f : links_->flows_in(t0, t1)) {
    if (lines.size() >= kMaxDrawn) break;
    const int a = row_of_(f->from.rank), b = row_of_(f->to.rank);
    if (a < 0 || b < 0) continue;
    const QPointF p(k->coordToPixel(toKey(f->from_ns)), v->coordToPixel(a));
    const QPointF q(k->coordToPixel(toKey(f->to_ns)), v->coordToPixel(b));
    ++drawn_;
    const auto col = [](double x) { return static_cast<std::uint64_t>(std::clamp(std::lround(x) + 32768L, 0L, 65535L)); };
    // Rows in 12 bits each (4,096 rows: 2,048 ranks), columns in 16 bits each, 20 apart.
    seen.push_back(static_cast<std::uint64_t>(a & 0xfff) << 52 | static_cast<std::uint64_t>(b & 0xfff) << 40 |
                   col(p.x()) << 20 | col(q.x()));
    lines.push_back({p, q});
  }
  // Keep the first line of each key.
  std::vector<std::size_t> order(lines.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return seen[x] < seen[y]; });
  std::vector<char> keep(lines.size(), 0);
  for (std::size_t i = 0; i < order.size(); ++i) keep[order[i]] = i == 0 || seen[order[i]] != seen[order[i - 1]];
  std::size_t kept = 0;
  for (char c : keep) kept += c;
  // Few: smooth arrows with heads; many: plain lines, which are as many pixels apart as can be.
  const bool fine = kept <= kFineLines;
  painter->setRenderHint(QPainter::Antialiasing, fine);
  QColor c = color_;
  c.setAlpha(fine ? 200 : 120);
  painter->setPen(QPen(c, fine ? 1.2 : 1.0));
  painter->setBrush(c);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!keep[i]) continue;
    const QPointF p = lines[i].p, q = lines[i].q;
    painter->drawLine(p, q);
    ++lines_;
    const double len = std::hypot(q.x() - p.x(), q.y() - p.y());
    if (fine && len > 6) {  // the head at the partner's end
      const double ux = (q.x() - p.x()) / len, uy = (q.y() - p.y()) / len;
      const QPointF back(q.x() - 6 * ux, q.y() - 6 * uy);
      const QPointF side(-uy * 3, ux * 3);
      painter->drawPolygon(QPolygonF({q, back + side, back - side}));
    }
  }
  painter->setRenderHint(QPainter::Antialiasing, false);
}

void FlowPlottable::drawLegendIcon(QCPPainter* painter, const QRectF& rect) const {
  painter->setPen(QPen(color_, 1.5));
  painter->drawLine(QLineF(rect.left(), rect.center().y(), rect.right(), rect.center().y()));
}

}  // namespace remat::gui
