// The memory timeline's allocations view: a QCustomPlot plottable that draws every allocation
// as its own band, stacked in allocation order (core's alloc_bands), colored by category.
//
// Level of detail, chosen again on every replot: allocations thinner than the bytes of a pixel
// at the current byte scale (rounded up to a power of two, so zooming re-lays out only when the
// scale crosses one, and only when an allocation's size lies between the two) are merged into
// one "small allocations" band per category on top of the others; the breakpoints of a band's bottom are kept at one per pixel column; bands shorter
// than a pixel in time are drawn as one-pixel columns, those of one category that touch in a
// column merged into one. Times are nanoseconds, drawn as (t - origin) * scale.
#pragma once
#include <QString>
#include <list>
#include <memory>
#include <qcustomplot.h>

#include "core/analysis/alloc_bands.h"

namespace remat::gui {

class AllocBandsPlottable : public QCPAbstractPlottable {
 public:
  AllocBandsPlottable(QCPAxis* keyAxis, QCPAxis* valueAxis);

  void setBands(std::shared_ptr<const AllocBands> bands);
  const AllocBands* bands() const { return bands_.get(); }
  void setShown(const CategorySet& shown);
  // x = (t_ns - origin) * scale
  void setTimeMapping(std::int64_t origin, double scale) {
    origin_ = origin;
    scale_ = scale;
  }

  // The layout for the current byte scale (computed when needed).
  const AllocLayout& layout() const;
  // The smallest allocation drawn as a band of its own at the current byte scale.
  std::uint64_t minBytes() const;
  // What lies under a point in the plot's pixels (single bands within two pixels in time).
  BandHit hitAt(const QPointF& pos) const;
  // The hover text of a hit: name, size, category, block, phase, allocation and free time.
  QString describe(const BandHit& h) const;
  // A band drawn outlined (index into AllocBands::bands(); AllocBands::npos: none).
  void setPinned(std::size_t band) { pinned_ = band; }
  std::size_t pinned() const { return pinned_; }
  // Polygons and columns drawn by the last replot (for tests and benchmarks).
  std::size_t lastDrawn() const { return drawn_; }

  double selectTest(const QPointF& pos, bool onlySelectable, QVariant* details = nullptr) const override;
  QCPRange getKeyRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth) const override;
  QCPRange getValueRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth,
                         const QCPRange& inKeyRange = QCPRange()) const override;

 protected:
  void draw(QCPPainter* painter) override;
  void drawLegendIcon(QCPPainter* painter, const QRectF& rect) const override;

 private:
  double toKey(std::int64_t t) const { return static_cast<double>(t - origin_) * scale_; }
  std::int64_t toTime(double key) const { return origin_ + static_cast<std::int64_t>(key / scale_); }
  void drawMerged(QCPPainter* painter, const AllocLayout& L, std::int64_t t0, std::int64_t t1, std::size_t pixels);
  void drawBands(QCPPainter* painter, const AllocLayout& L, std::int64_t t0, std::int64_t t1);

  std::shared_ptr<const AllocBands> bands_;
  CategorySet shown_{};
  std::int64_t origin_ = 0;
  double scale_ = 1.0;
  std::size_t pinned_ = AllocBands::npos;
  mutable std::list<AllocLayout> cache_;  // most recent first, a few byte scales
  std::vector<std::uint64_t> sizes_;       // of every allocation, sorted
  mutable std::size_t drawn_ = 0;
};

}  // namespace remat::gui
