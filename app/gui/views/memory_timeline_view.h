// The memory timeline of a run's last counted step: live device bytes stacked by category (from
// core's memory_timeline, downsampled per zoom step keeping each bucket's highest point so the
// peak survives), host-offloaded bytes as a separate line, the reserved bytes on CUDA, the
// phases shaded behind, the peak marked and the simulator's predicted peak as a dashed line.
// Hovering shows the time, the bytes per category and the largest tensors alive; a click picks
// those tensors (for the ledger).
#pragma once
#include <QList>
#include <QPair>
#include <QString>
#include <memory>
#include <vector>

#include "core/analysis/live_tensors.h"
#include "core/analysis/memory_timeline.h"
#include "core/analysis/phase_spans.h"
#include "core/trace/trace.h"
#include "views/plot_view.h"

class QCPGraph;
class QCPItemStraightLine;
class QCPItemText;
class QCPItemRect;
class QCPRange;
class QMouseEvent;
class QCPTextElement;

namespace remat::gui {

enum class TimeMode { Absolute, Normalized };

class MemoryTimelineView : public PlotView {
  Q_OBJECT
 public:
  explicit MemoryTimelineView(QWidget* parent = nullptr);
  ~MemoryTimelineView() override;

  void setTrace(std::shared_ptr<const Trace> t, const QString& title = {});
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
  QString describeAt(double key) const;
  void setCursorKey(double key);  // a vertical cursor (NaN hides it)

 signals:
  void tensorsPicked(const QList<QPair<int, QString>>& tensors, qint64 t_ns);
  void cursorMoved(double key);

 protected:
  void onRestyle() override;

 private:
  void rebuild();
  void updateVisible();
  void clampRange(const QCPRange& r);
  std::size_t pointAt(double key) const;
  std::size_t eventAt(std::size_t point) const;
  void onMouseMove(QMouseEvent* e);
  void onMousePress(QMouseEvent* e);
  void onMouseRelease(QMouseEvent* e);

  std::shared_ptr<const Trace> trace_;
  QString title_;
  MemoryTimeline tl_;
  std::vector<PhaseSpan> phases_;
  LiveTensorIndex live_;
  TimeMode mode_ = TimeMode::Absolute;
  bool compact_ = false;
  double value_max_ = 0, extent_ = 0;
  std::int64_t origin_ = 0, duration_ = 1;

  // Full-resolution series, x in ns since origin.
  std::vector<double> x_, total_, host_, reserved_;
  std::vector<Category> shown_;               // stacked categories, bottom first
  std::vector<std::vector<double>> cum_;      // per shown category: the stack's top after it
  double host_max_ = 0, reserved_max_ = 0;

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
  bool clamping_ = false;
  QPoint press_pos_;
};

}  // namespace remat::gui
