// Charts of the compare view: a bar per run (peak memory, or median step time with the overhead
// against the `none` run written over the bar), and the peak-memory-versus-step-time scatter of
// every run with the trade-off frontier (runs no other run beats in both) joined by a line.
#pragma once
#include <QStringList>
#include <QVector>
#include <vector>

#include "run_entry.h"
#include "views/plot_view.h"

namespace remat::gui {

class RunBarChart : public PlotView {
  Q_OBJECT
 public:
  enum class Unit { Bytes, Milliseconds };
  RunBarChart(const QString& title, Unit unit, QWidget* parent = nullptr);
  // One bar per run; `notes` are written over the bars ("−42 %", "+31 %").
  void setBars(const QStringList& labels, const QVector<double>& values, const QVector<QColor>& colors,
               const QStringList& notes);
  int barCount() const { return count_; }
  void resetZoom() override;

 private:
  Unit unit_;
  int count_ = 0;
};

class FrontierScatter : public PlotView {
  Q_OBJECT
 public:
  explicit FrontierScatter(QWidget* parent = nullptr);
  void setRuns(const std::vector<RunEntry>& runs);
  int pointCount() const { return points_; }
  void resetZoom() override;

 private:
  int points_ = 0;
};

}  // namespace remat::gui
