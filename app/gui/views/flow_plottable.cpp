#include "views/flow_plottable.h"

#include <cmath>

namespace remat::gui {

FlowPlottable::FlowPlottable(QCPAxis* keyAxis, QCPAxis* valueAxis) : TimePlottable(keyAxis, valueAxis) {}

void FlowPlottable::setLinks(std::shared_ptr<const CollectiveLinks> links, RowOf row_of) {
  links_ = std::move(links);
  row_of_ = std::move(row_of);
}

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
  QCPAxis* k = keyAxis();
  QCPAxis* v = valueAxis();
  if (!links_ || !row_of_ || !k || !v) return;
  const auto [t0, t1, pixels] = visibleTimes();
  (void)pixels;
  painter->setRenderHint(QPainter::Antialiasing, true);
  QColor c = color_;
  c.setAlpha(200);
  painter->setPen(QPen(c, 1.2));
  painter->setBrush(c);
  for (const Flow* f : links_->flows_in(t0, t1)) {
    if (drawn_ >= kMaxDrawn) break;
    const int a = row_of_(f->from.rank), b = row_of_(f->to.rank);
    if (a < 0 || b < 0) continue;
    const QPointF p(k->coordToPixel(toKey(f->from_ns)), v->coordToPixel(a));
    const QPointF q(k->coordToPixel(toKey(f->to_ns)), v->coordToPixel(b));
    painter->drawLine(p, q);
    // The head at the partner's end.
    const double len = std::hypot(q.x() - p.x(), q.y() - p.y());
    if (len > 6) {
      const double ux = (q.x() - p.x()) / len, uy = (q.y() - p.y()) / len;
      const QPointF back(q.x() - 6 * ux, q.y() - 6 * uy);
      const QPointF side(-uy * 3, ux * 3);
      painter->drawPolygon(QPolygonF({q, back + side, back - side}));
    }
    ++drawn_;
  }
  painter->setRenderHint(QPainter::Antialiasing, false);
}

void FlowPlottable::drawLegendIcon(QCPPainter* painter, const QRectF& rect) const {
  painter->setPen(QPen(color_, 1.5));
  painter->drawLine(QLineF(rect.left(), rect.center().y(), rect.right(), rect.center().y()));
}

}  // namespace remat::gui
