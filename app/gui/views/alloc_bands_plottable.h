// The memory timeline's allocations view: a QCustomPlot plottable that draws every allocation
// as its own band, stacked in allocation order (core's alloc_bands), colored by category.
//
// Level of detail, chosen again on every replot: allocations thinner than the bytes of a pixel
// at the current byte scale (rounded up to a power of two, so zooming re-lays out only when the
// scale crosses one, and only when an allocation's size lies between the two) are merged into
// one "small allocations" band per category on top of the others; the breakpoints of a band's bottom are kept at one per pixel column; bands shorter
// than a pixel in time are drawn as one-pixel columns, those of one category that touch in a
// column merged into one. Times are mapped as TimePlottable does.
//
// A replot never waits for a layout while one of the shown categories is at hand: when the byte
// scale needs a threshold not laid out yet, the nearest one laid out is drawn (the same stack,
// merged at another size) while a worker thread lays the bands out for the new threshold; the
// plot is replotted when it is ready. Only the first layout of a set of shown categories, when
// none was given (addLayout), is made on the GUI thread. Runs of single bands out of the view's time or byte range are skipped whole
// (AllocLayout::blocks).
#pragma once
#include <QFutureWatcher>
#include <QString>
#include <list>
#include <memory>

#include "core/analysis/alloc_bands.h"
#include "views/time_plottable.h"

namespace remat::gui {

class AllocBandsPlottable : public TimePlottable {
 public:
  AllocBandsPlottable(QCPAxis* keyAxis, QCPAxis* valueAxis);
  ~AllocBandsPlottable() override;

  void setBands(std::shared_ptr<const AllocBands> bands);
  const AllocBands* bands() const { return bands_.get(); }
  // A layout of these bands made before (kept with those the view makes itself).
  void addLayout(std::shared_ptr<const AllocLayout> layout);
  void setShown(const CategorySet& shown);
  // Lay out new thresholds on a worker thread while the nearest one is drawn (default), or on
  // the GUI thread before the replot.
  void setRelayoutInBackground(bool on) { background_ = on; }

  // The layout for the current byte scale (computed here when needed).
  const AllocLayout& layout() const;
  // The layout the last replot drew (the current scale's when no relayout is pending).
  const AllocLayout& drawnLayout() const;
  // A layout is being made on a worker thread (the plot replots when it is ready).
  bool relayoutPending() const { return pending_ != 0; }
  // The smallest allocation drawn as a band of its own at the current byte scale.
  std::uint64_t minBytes() const;
  // What lies under a point in the plot's pixels (single bands within two pixels in time), in
  // the layout drawn.
  BandHit hitAt(const QPointF& pos) const;
  // The hover text of a hit: name, size, category, block, phase, allocation and free time.
  QString describe(const BandHit& h) const;
  // A band drawn outlined (index into AllocBands::bands(); AllocBands::npos: none).
  void setPinned(std::size_t band) { pinned_ = band; }
  std::size_t pinned() const { return pinned_; }
  // Polygons and columns drawn by the last replot (for tests and benchmarks).
  std::size_t lastDrawn() const { return drawn_; }

  QCPRange getKeyRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth) const override;
  QCPRange getValueRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth,
                         const QCPRange& inKeyRange = QCPRange()) const override;

 protected:
  void draw(QCPPainter* painter) override;
  void drawLegendIcon(QCPPainter* painter, const QRectF& rect) const override;

 private:
  using LayoutPtr = std::shared_ptr<const AllocLayout>;
  // The cached layout of the shown categories equal to threshold `level`'s, or null.
  LayoutPtr cached(std::uint64_t level) const;
  // The cached layout of the shown categories nearest to `level`, or null.
  LayoutPtr nearest(std::uint64_t level) const;
  void remember(LayoutPtr l) const;
  // The layout to draw now (see above).
  LayoutPtr frameLayout();
  void startRelayout(std::uint64_t level);
  void onRelayout();
  void drawMerged(QCPPainter* painter, const AllocLayout& L, std::int64_t t0, std::int64_t t1, std::size_t pixels);
  void drawBands(QCPPainter* painter, const AllocLayout& L, std::int64_t t0, std::int64_t t1);

  std::shared_ptr<const AllocBands> bands_;
  CategorySet shown_{};
  std::size_t pinned_ = AllocBands::npos;
  mutable std::list<LayoutPtr> cache_;  // most recent first, a few byte scales
  LayoutPtr drawn_layout_;
  bool background_ = true;
  std::uint64_t pending_ = 0;  // the threshold being laid out on the worker (0: none)
  std::uint64_t generation_ = 0, pending_generation_ = 0;  // of the bands and shown categories
  QFutureWatcher<LayoutPtr> relayout_;
  struct MergedSteps {  // the merged bands' steps kept by the last draw's downsampling
    LayoutPtr layout;
    std::int64_t t0 = 0, t1 = 0;
    std::size_t pixels = 0;
    std::vector<std::size_t> idx;
  } merged_steps_;
  mutable std::size_t drawn_ = 0;
};

}  // namespace remat::gui
