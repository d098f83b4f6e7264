// Charts of the compare view, drawn per group of like runs (same model, shape, dtype and device):
// a bar per run (peak memory, or median step time) with a min-max whisker over the counted
// steps and its reduction or overhead against the group's `none` run written over it, hatched
// and labelled "within noise" when the spread is larger than the overhead; and the peak-memory
// versus step-time scatter of the group's runs with their trade-off frontier (runs no other run
// of the group beats in both) joined by a line. Value labels never overlap or leave the plot:
// they turn vertical when a bar's slot is narrower than the text (inside the bar when it is tall
// enough, else over it, elided only when neither has room), the value axis leaves room for
// upright ones, and run names on the axis break after the number and are elided to the slot.
// Beside them, the budget policy's recompute cost against the activation budget (the line, from
// its smallest budget to none's peak: core/analysis/frontier.h) with the runs as points.
#pragma once
#include <QColor>
#include <QRectF>
#include <QStringList>
#include <QVector>
#include <utility>
#include <vector>

#include "core/analysis/frontier.h"
#include "run_entry.h"
#include "views/plot_view.h"

class QCPItemText;

namespace remat::gui {

class RunBarChart : public PlotView {
  Q_OBJECT
 public:
  enum class Unit { Bytes, Milliseconds };
  struct Bar {
    QString label;             // "#3 selective"
    double value = 0;          // the bar
    double low = 0, high = 0;  // the whisker (min and max over the counted steps)
    QColor color;
    QString note;              // "baseline", "−42.0 %", "+31.0 %", "within noise"
    bool hatched = false;      // an overhead within noise
  };
  RunBarChart(const QString& title, Unit unit, QWidget* parent = nullptr);
  void setBars(const QVector<Bar>& bars);
  int barCount() const { return static_cast<int>(bars_.size()); }
  const Bar& bar(int i) const { return bars_[i]; }
  QString labelText(int i) const;
  // Where the value label of bar i is drawn, in the plot's pixels (after a replot).
  QRectF labelRect(int i) const;
  bool labelsVertical() const { return vertical_; }
  void resetZoom() override;

 protected:
  bool eventFilter(QObject* o, QEvent* e) override;

 private:
  void layoutLabels();  // rotation and the value axis' headroom for the current size
  Unit unit_;
  QVector<Bar> bars_;
  QVector<QCPItemText*> labels_;
  bool vertical_ = false, one_line_ = false;
};

class FrontierScatter : public PlotView {
  Q_OBJECT
 public:
  explicit FrontierScatter(QWidget* parent = nullptr);
  // The runs of one group; incomplete runs are left out.
  void setRuns(const std::vector<RunEntry>& runs);
  int pointCount() const { return points_; }
  int frontierCount() const { return frontier_; }
  // Where run i's name is drawn, in the plot's pixels.
  QRectF nameRect(int i) const;
  // Where run i's point is, in the plot's pixels.
  QPointF pointPixel(int i) const;
  void resetZoom() override;

 protected:
  bool eventFilter(QObject* o, QEvent* e) override;

 private:
  void placeNames();
  QVector<QCPItemText*> names_;
  int points_ = 0, frontier_ = 0;
  std::pair<double, double> x_range_{0, 1}, y_range_{0, 1};  // the whole data range
};

class BudgetFrontierChart : public PlotView {
  Q_OBJECT
 public:
  explicit BudgetFrontierChart(QWidget* parent = nullptr);
  // The line of `f` (its budgets, each at the recompute FLOPs of its plan) and the group's
  // complete runs at (their activation peak, their recompute FLOPs).
  void setFrontier(const Frontier& f, const std::vector<RunEntry>& runs);
  // Says why there is no line (the message in the plot) instead.
  void setUnavailable(const QString& why);
  int linePoints() const { return line_points_; }
  // Point i of the line as drawn: (budget in bytes, recompute GFLOP).
  QPointF linePoint(int i) const;
  int runPoints() const { return static_cast<int>(run_points_.size()); }
  // Where run point i is, in the plot's pixels (after a replot).
  QPointF runPixel(int i) const;
  void resetZoom() override;

 private:
  int line_points_ = 0;
  QVector<QPointF> run_points_;  // (bytes, GFLOP)
  std::pair<double, double> x_range_{0, 1}, y_range_{0, 1};
};

}  // namespace remat::gui
