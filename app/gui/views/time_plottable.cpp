#include "views/time_plottable.h"

#include <algorithm>

namespace remat::gui {

TimePlottable::TimePlottable(QCPAxis* keyAxis, QCPAxis* valueAxis) : QCPAbstractPlottable(keyAxis, valueAxis) {
  setAntialiased(false);
  setAntialiasedFill(false);
  setSelectable(QCP::stNone);
}

double TimePlottable::selectTest(const QPointF&, bool, QVariant*) const { return -1; }

TimePlottable::Visible TimePlottable::visibleTimes() const {
  const QRect clip = clipRect();
  const double left = clip.left(), right = clip.right() + 1;
  double k0 = keyAxis()->pixelToCoord(left), k1 = keyAxis()->pixelToCoord(right);
  if (k0 > k1) std::swap(k0, k1);
  return {toTime(k0), toTime(k1) + 1, static_cast<std::size_t>(std::max(1.0, right - left))};
}

}  // namespace remat::gui
