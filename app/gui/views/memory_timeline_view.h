// The memory timeline of a run's last counted step: live device bytes stacked by category (from
// core's memory_timeline, downsampled per zoom step keeping each bucket's highest point so the
// peak survives), host-offloaded bytes as a separate line, the reserved bytes on CUDA, the
// phases shaded behind, the peak marked and the simulator's predicted peak as a dashed line.
// Hovering shows the time, the bytes per category and the largest tensors alive; a click picks
// those tensors (for the ledger).
//
// Focus: a click on a category's legend item hides or shows it, and "Activations only" hides the
// static categories (core's memory_focus); the shown categories are stacked from 0 and the value
// axis is fitted to them, the hover's tensors are those of shown categories. The wheel over the
// value axis, or Ctrl+wheel anywhere, zooms bytes; the plain wheel zooms time.
//
// Two modes, toggled above the plot: the stacked categories, or the allocations (each live
// allocation its own band, alloc_bands_plottable.h) on the same axes, under the same focus;
// hovering a band describes it, a click pins its details (and picks its tensor).
#pragma once
#include <QList>
#include <QPair>
#include <QString>
#include <memory>
#include <vector>

#include "core/analysis/live_tensors.h"
#include "core/analysis/memory_focus.h"
#include "core/analysis/memory_timeline.h"
#include "core/analysis/phase_spans.h"
#include "core/trace/trace.h"
#include "views/plot_view.h"
#include "views/run_view_data.h"

class QCPGraph;
class QCPItemStraightLine;
class QCPItemText;
class QCPItemRect;
class QCPRange;
class QMouseEvent;
class QCPTextElement;
class QCPAbstractLegendItem;
class QToolButton;
class QLabel;
class QHBoxLayout;

namespace remat::gui {

class AllocBandsPlottable;
class PeakAliveDialog;

enum class TimeMode { Absolute, Normalized };
enum class MemoryMode { Stacked, Allocations };

class MemoryTimelineView : public PlotView {
  Q_OBJECT
 public:
  explicit MemoryTimelineView(QWidget* parent = nullptr);
  ~MemoryTimelineView() override;

  // Builds the view's data from `t` (memory_view_data) on this thread and shows it.
  void setTrace(std::shared_ptr<const Trace> t, const QString& title = {});
  // Shows data built before (run_view_data.h), and the allocations' bands and a first layout of
  // them when given (else built when the allocations are first shown).
  void setData(std::shared_ptr<const Trace> t, std::shared_ptr<const MemoryViewData> d, const QString& title = {},
               std::shared_ptr<const AllocBands> bands = {}, std::shared_ptr<const AllocLayout> layout = {});
  const std::shared_ptr<const Trace>& trace() const { return trace_; }
  void setTimeMode(TimeMode m);
  TimeMode timeMode() const { return mode_; }
  // Compact: for the compare view (title inside, no legend, smaller).
  void setCompact(bool compact);
  // A shared top of the value axis (compare view); 0: the view's own.
  void setValueMax(double v);
  double dataValueMax() const;

  // Keys: nanoseconds since the start of the step (absolute) or fractions of it (normalized).
  // The range reaches at least `extent` (a shared axis over runs of different lengths).
  QCPRange dataTimeRange() const;
  void setTimeExtent(double extent) { extent_ = extent; }
  std::int64_t origin() const { return origin_; }
  double timeScale() const;
  void resetZoom() override;

  // The highest device total among the points drawn right now.
  double plottedMaximum() const;
  // The plot area (axis rect) in this widget's coordinates.
  QRect plotArea() const;
  // The largest tensors alive at a key, as (block, tensor name), and the hover text there.
  QList<QPair<int, QString>> tensorsAt(double key, int n) const;
  // ... as the allocations, of shown categories only.
  std::vector<const Allocation*> largestAt(double key, std::size_t n) const;
  QString describeAt(double key) const;
  void setCursorKey(double key);  // a vertical cursor (NaN hides it)

  // The categories shown (kept while the same run is shown; a new run shows them all).
  const CategorySet& shownCategories() const { return shown_; }
  void setShownCategories(const CategorySet& shown);
  void setCategoryShown(Category c, bool shown);
  // Every category but the static ones, or all of them again.
  void setActivationsOnly(bool on);
  QToolButton* activationsOnlyButton() const { return activations_only_; }
  // The legend item of a category (null when the run has none of it or the legend is hidden).
  QCPAbstractLegendItem* legendItem(Category c) const;
  // The value axis' top that fits what is shown (the compare view's shared top when set).
  double fittedValueMax() const;
  // Zooms the value axis by `steps` wheel steps (positive: in) around the value `at`.
  void zoomValue(double steps, double at);

  // Stacked categories or one band per allocation.
  void setMemoryMode(MemoryMode m);
  MemoryMode memoryMode() const { return memory_mode_; }
  AllocBandsPlottable* allocations() const { return bands_; }
  // The allocation under a point of the plot (its pixels) described, empty when none; a click
  // there pins it (none: unpins).
  QString describeAllocationAt(const QPointF& pos) const;
  void pinAllocationAt(const QPointF& pos);
  // The pinned allocation's lifetime (x-axis coordinates; to the end of the range when never
  // freed).
  std::optional<std::pair<double, double>> selection() const override;
  QLabel* pinnedLabel() const { return pinned_; }
  bool cursorShown() const;  // whether the vertical cursor is drawn
  // "Alive at the peak" (views/peak_dialog.h) for the run shown, opened non-modal (its button
  // above the plot, or a click on the peak's marker or label); null without a run.
  PeakAliveDialog* showPeakAlive();
  QToolButton* peakButton() const { return peak_button_; }

 signals:
  void tensorsPicked(const QList<QPair<int, QString>>& tensors, qint64 t_ns);
  void cursorMoved(double key);

 protected:
  void onRestyle() override;
  bool eventFilter(QObject* o, QEvent* e) override;

 private:
  void rebuild();
  void updateVisible();
  void clampRange(const QCPRange& r);
  std::size_t pointAt(double key) const;
  std::size_t eventAt(std::size_t point) const;
  void onMouseMove(QMouseEvent* e);
  void onMousePress(QMouseEvent* e);
  void onMouseRelease(QMouseEvent* e);
  bool onPeak(const QPointF& pos) const;  // on the peak's marker or label (pixels)
  void onLegendClick(QCPAbstractLegendItem* item);
  // Restacks the shown categories, hides the rest, refits the value axis and replots.
  void applyFocus();
  void restack();
  bool wholeDevice() const;  // no device category hidden
  void showAllocations();   // builds the bands on first use
  void addModeButtons(QHBoxLayout* bar);
  QCPGraph* categoryGraph(Category c) const;

  std::shared_ptr<const Trace> trace_;
  QString title_;
  std::shared_ptr<const MemoryViewData> d_ = std::make_shared<const MemoryViewData>();  // never null
  TimeMode mode_ = TimeMode::Absolute;
  bool compact_ = false;
  double value_max_ = 0, extent_ = 0;
  std::int64_t origin_ = 0, duration_ = 1;

  using Stack = std::vector<std::vector<double>>;
  std::shared_ptr<const Stack> cum_;  // per stacked category: the shown stack's top after it
  CategorySet shown_ = all_categories();

  std::vector<QCPGraph*> stack_;
  std::vector<QCPItemRect*> shading_;  // one per phase span
  QCPGraph* total_graph_ = nullptr;
  QCPGraph* host_graph_ = nullptr;
  QCPGraph* reserved_graph_ = nullptr;
  QCPGraph* peak_graph_ = nullptr;
  QCPItemText* peak_label_ = nullptr;
  QCPItemStraightLine* predicted_ = nullptr;
  QCPItemText* predicted_label_ = nullptr;
  QCPItemStraightLine* cursor_ = nullptr;
  QCPTextElement* title_element_ = nullptr;
  QToolButton* activations_only_ = nullptr;
  QWidget* focus_bar_ = nullptr;
  MemoryMode memory_mode_ = MemoryMode::Stacked;
  AllocBandsPlottable* bands_ = nullptr;
  QToolButton* stacked_button_ = nullptr;
  QToolButton* allocations_button_ = nullptr;
  QToolButton* peak_button_ = nullptr;
  QLabel* pinned_ = nullptr;
  bool clamping_ = false;
  QPoint press_pos_;
};

}  // namespace remat::gui
