// Base of the plottables drawn over a run's time axis (SpanPlottable, AllocBandsPlottable):
// times are nanoseconds, drawn at key (t - origin) * scale; not selectable, drawn without
// antialiasing; and the time range [t0, t1] the plot's clip rectangle shows, with its width in
// pixels, for the level of detail of a draw.
#pragma once
#include <cstdint>
#include <qcustomplot.h>

namespace remat::gui {

class TimePlottable : public QCPAbstractPlottable {
 public:
  TimePlottable(QCPAxis* keyAxis, QCPAxis* valueAxis);

  // x = (t_ns - origin) * scale
  void setTimeMapping(std::int64_t origin, double scale) {
    origin_ = origin;
    scale_ = scale;
  }
  std::int64_t timeOrigin() const { return origin_; }

  double selectTest(const QPointF& pos, bool onlySelectable, QVariant* details = nullptr) const override;

 protected:
  double toKey(std::int64_t t) const { return static_cast<double>(t - origin_) * scale_; }
  std::int64_t toTime(double key) const { return origin_ + static_cast<std::int64_t>(key / scale_); }
  // The times under the clip rectangle's left and right edges (t1 one past), and its width.
  struct Visible {
    std::int64_t t0 = 0, t1 = 0;
    std::size_t pixels = 1;
  };
  Visible visibleTimes() const;

 private:
  std::int64_t origin_ = 0;
  double scale_ = 1.0;
};

}  // namespace remat::gui
