// The arrows between a collective and its partners on the other ranks (core/analysis/
// collective_links.h), drawn over the Ranks page's lanes: from the member the others waited for
// (or a transfer's send) to each partner, row to row, those that cross the visible time range
// only, at most kMaxDrawn per draw. Arrows between the same pixel columns of the same rows are
// one line; up to kFineLines lines are smooth arrows with heads, more are plain lines.
#pragma once
#include <functional>
#include <memory>

#include "core/analysis/collective_links.h"
#include "views/time_plottable.h"

namespace remat::gui {

class FlowPlottable : public TimePlottable {
 public:
  static constexpr std::size_t kMaxDrawn = 20000;
  static constexpr std::size_t kFineLines = 300;
  // The value (display position) of a rank's row of collectives; < 0 when it is not drawn.
  using RowOf = std::function<int(int rank)>;

  FlowPlottable(QCPAxis* keyAxis, QCPAxis* valueAxis);
  void setRowOf(RowOf row_of) { row_of_ = std::move(row_of); }
  void setLinks(std::shared_ptr<const CollectiveLinks> links) { links_ = std::move(links); }
  void setColor(const QColor& c) { color_ = c; }
  // Flows drawn by the last replot, and the lines they took (for tests and benchmarks).
  std::size_t lastDrawn() const { return drawn_; }
  std::size_t lastLines() const { return lines_; }

  QCPRange getKeyRange(bool& found, QCP::SignDomain = QCP::sdBoth) const override;
  QCPRange getValueRange(bool& found, QCP::SignDomain = QCP::sdBoth, const QCPRange& = QCPRange()) const override;

 protected:
  void draw(QCPPainter* painter) override;
  void drawLegendIcon(QCPPainter* painter, const QRectF& rect) const override;

 private:
  std::shared_ptr<const CollectiveLinks> links_;
  RowOf row_of_;
  QColor color_{0x8e, 0x44, 0xad};
  std::size_t drawn_ = 0, lines_ = 0;
};

}  // namespace remat::gui
