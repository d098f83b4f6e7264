// Base of the views that draw with QCustomPlot: owns the plot, styles it from the window's
// palette (again when the palette changes, so light and dark both read), offers "Save image…"
// and "Reset zoom" on right click, and reports when the user interacts with it (so File ›
// Export plot knows which plot is meant).
#pragma once
#include <QWidget>

class QCustomPlot;

namespace remat::gui {

class PlotView : public QWidget {
  Q_OBJECT
 public:
  explicit PlotView(QWidget* parent = nullptr);
  QCustomPlot* plot() const { return plot_; }
  // Restyles from the current palette and replots.
  void restyle();
  // The whole data range again.
  virtual void resetZoom() = 0;

 signals:
  void activated(QCustomPlot* plot);

 protected:
  void changeEvent(QEvent* e) override;
  bool eventFilter(QObject* o, QEvent* e) override;
  // Views recolor what style_plot does not know (their own items) here.
  virtual void onRestyle() {}

  QCustomPlot* plot_;
};

}  // namespace remat::gui
