// Base of the views that draw with QCustomPlot: owns the plot, styles it from the window's
// palette (again when the palette changes, so light and dark both read), offers "Save image…"
// and "Reset zoom" on right click, and reports when the user interacts with it (so File ›
// Export plot knows which plot is meant).
//
// A view with a time axis (setTimeNavigation) also takes the keys of a trace viewer while its plot
// has the keyboard focus (shortcuts.h has them): W / S and Up / Down zoom in and out around the
// mouse (else the middle), A / D and Left / Right pan, F zooms to the selection, M marks it (a
// band over the plot; M again takes it away). The selection is the view's own (selection()) or,
// when it has none, that of a view linked to it (linkTimeViews); the mark shows on every linked
// view.
#pragma once
#include <QList>
#include <QPointer>
#include <QWidget>
#include <optional>
#include <utility>

class QCustomPlot;
class QCPItemRect;
class QMenu;

namespace remat::gui {

// The plot area's left and right margins of every view drawn on a step's time axis (the run
// view's three, the Ranks page's lanes), so that views stacked on one page line up to the pixel.
inline constexpr int kTimeAxisLeftMargin = 84, kTimeAxisRightMargin = 18;

class PlotView : public QWidget {
  Q_OBJECT
 public:
  explicit PlotView(QWidget* parent = nullptr);
  QCustomPlot* plot() const { return plot_; }
  // Restyles from the current palette and replots.
  void restyle();
  // The whole data range again.
  virtual void resetZoom() = 0;

  // The keys above on this view's x axis (a time axis).
  void setTimeNavigation(bool on);
  // What F zooms to and M marks, in the x axis' coordinates: the view's clicked or selected item.
  virtual std::optional<std::pair<double, double>> selection() const { return std::nullopt; }
  // The marked range (none when nothing is marked).
  std::optional<std::pair<double, double>> mark() const { return mark_; }
  void setMark(std::optional<std::pair<double, double>> r);
  // Views whose x axes show the same time: they share a selection and a mark (each keeps the
  // others in the list).
  static void linkTimeViews(const QList<PlotView*>& views);
  // The key handling, callable without a key event (what W, S, A, D, F and M do).
  void zoomTime(double factor);  // < 1 zooms in, around the mouse or the middle
  void panTime(double fraction);  // of the visible range; > 0 to the right
  bool zoomToSelection();         // false when there is no selection
  void toggleMark();

 signals:
  void activated(QCustomPlot* plot);

 protected:
  void changeEvent(QEvent* e) override;
  bool eventFilter(QObject* o, QEvent* e) override;
  // Views recolor what style_plot does not know (their own items) here.
  virtual void onRestyle() {}
  // Actions of their own at the top of the right-click menu at `pos` (the plot's pixels).
  virtual void addMenuActions(QMenu& menu, const QPoint& pos) { (void)menu, (void)pos; }
  // Draws the mark again (after the view cleared its plot's items).
  void drawMark();

  QCustomPlot* plot_;

 private:
  bool navigationKey(int key);
  std::optional<std::pair<double, double>> linkedSelection() const;

  bool time_navigation_ = false;
  std::optional<double> mouse_x_;  // the mouse's x in pixels while it is over the plot
  std::optional<std::pair<double, double>> mark_;
  QPointer<QCPItemRect> mark_item_;
  QList<QPointer<PlotView>> linked_;
};

}  // namespace remat::gui
