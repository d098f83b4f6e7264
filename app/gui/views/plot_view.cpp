#include "views/plot_view.h"

#include <QContextMenuEvent>
#include <QFileDialog>
#include <QKeyEvent>
#include <QMenu>
#include <QMessageBox>
#include <QMouseEvent>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "export.h"
#include "theme.h"

namespace remat::gui {

namespace {
constexpr double kZoomStep = 0.8;  // W: the visible range times this; S: divided by it
constexpr double kPanStep = 0.2;   // A / D: this fraction of the visible range
constexpr double kFocusMargin = 0.05;  // F: the selection plus this fraction on each side
}  // namespace

PlotView::PlotView(QWidget* parent) : QWidget(parent), plot_(new QCustomPlot(this)) {
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  l->addWidget(plot_);
  plot_->setNoAntialiasingOnDrag(true);
  plot_->setPlottingHint(QCP::phCacheLabels, true);
  plot_->installEventFilter(this);
  plot_->setContextMenuPolicy(Qt::DefaultContextMenu);
}

void PlotView::restyle() {
  style_plot(plot_, palette());
  onRestyle();
  drawMark();
  plot_->replot();
}

void PlotView::setTimeNavigation(bool on) {
  time_navigation_ = on;
  plot_->setFocusPolicy(on ? Qt::WheelFocus : Qt::NoFocus);
  plot_->setMouseTracking(plot_->hasMouseTracking() || on);
}

void PlotView::linkTimeViews(const QList<PlotView*>& views) {
  for (PlotView* v : views) {
    v->linked_.clear();
    for (PlotView* o : views)
      if (o != v) v->linked_ << o;
  }
}

void PlotView::zoomTime(double factor) {
  QCPAxis* x = plot_->xAxis;
  const double at = mouse_x_ ? x->pixelToCoord(*mouse_x_) : x->range().center();
  x->scaleRange(factor, at);
  plot_->replot();
}

void PlotView::panTime(double fraction) {
  QCPAxis* x = plot_->xAxis;
  x->moveRange(fraction * x->range().size());
  plot_->replot();
}

std::optional<std::pair<double, double>> PlotView::linkedSelection() const {
  if (auto s = selection()) return s;
  for (const auto& v : linked_)
    if (v)
      if (auto s = v->selection()) return s;
  return std::nullopt;
}

bool PlotView::zoomToSelection() {
  const auto s = linkedSelection();
  if (!s) return false;
  const double w = std::max(s->second - s->first, 0.0);
  const double pad = w > 0 ? w * kFocusMargin : 1.0;
  plot_->xAxis->setRange(s->first - pad, s->second + pad);
  plot_->replot();
  return true;
}

void PlotView::toggleMark() {
  const auto s = linkedSelection();
  const std::optional<std::pair<double, double>> m = s && s != mark_ ? s : std::nullopt;
  setMark(m);
  for (const auto& v : linked_)
    if (v) v->setMark(m);
}

void PlotView::setMark(std::optional<std::pair<double, double>> r) {
  mark_ = r;
  drawMark();
  plot_->replot();
}

void PlotView::drawMark() {
  if (!mark_) {
    if (mark_item_) plot_->removeItem(mark_item_);
    return;
  }
  if (!mark_item_) {
    mark_item_ = new QCPItemRect(plot_);
    mark_item_->setSelectable(false);
    mark_item_->setClipToAxisRect(true);
    mark_item_->topLeft->setTypeY(QCPItemPosition::ptAxisRectRatio);
    mark_item_->bottomRight->setTypeY(QCPItemPosition::ptAxisRectRatio);
  }
  QColor c = palette().color(QPalette::Highlight);
  mark_item_->setPen(QPen(c, 1));
  c.setAlpha(40);
  mark_item_->setBrush(c);
  mark_item_->topLeft->setCoords(mark_->first, 0);
  mark_item_->bottomRight->setCoords(mark_->second, 1);
}

bool PlotView::navigationKey(int key) {
  switch (key) {
    case Qt::Key_W: case Qt::Key_Up: zoomTime(kZoomStep); return true;
    case Qt::Key_S: case Qt::Key_Down: zoomTime(1 / kZoomStep); return true;
    case Qt::Key_A: case Qt::Key_Left: panTime(-kPanStep); return true;
    case Qt::Key_D: case Qt::Key_Right: panTime(kPanStep); return true;
    case Qt::Key_F: zoomToSelection(); return true;
    case Qt::Key_M: toggleMark(); return true;
    default: return false;
  }
}

void PlotView::changeEvent(QEvent* e) {
  if (e->type() == QEvent::PaletteChange) restyle();
  QWidget::changeEvent(e);
}

bool PlotView::eventFilter(QObject* o, QEvent* e) {
  if (o == plot_) {
    if (e->type() == QEvent::MouseButtonPress || e->type() == QEvent::Wheel) emit activated(plot_);
    if (e->type() == QEvent::MouseMove) mouse_x_ = static_cast<QMouseEvent*>(e)->position().x();
    if (e->type() == QEvent::Leave) mouse_x_.reset();
    if (time_navigation_ && e->type() == QEvent::KeyPress) {
      auto* ke = static_cast<QKeyEvent*>(e);
      const auto mods = ke->modifiers() & ~(Qt::KeypadModifier | Qt::ShiftModifier);
      if (mods == Qt::NoModifier && navigationKey(ke->key())) {
        emit activated(plot_);
        return true;
      }
    }
    if (e->type() == QEvent::ContextMenu) {
      auto* ce = static_cast<QContextMenuEvent*>(e);
      QMenu menu(this);
      addMenuActions(menu, ce->pos());
      if (!menu.isEmpty()) menu.addSeparator();
      QAction* reset = menu.addAction(tr("Reset zoom"));
      QAction* save = menu.addAction(tr("Save image…"));
      QAction* chosen = menu.exec(ce->globalPos());
      if (chosen == reset) {
        resetZoom();
      } else if (chosen == save) {
        QString path = QFileDialog::getSaveFileName(this, tr("Save plot"), "plot.png",
                                                    tr("PNG image (*.png);;PDF document (*.pdf)"));
        if (!path.isEmpty()) {
          try {
            export_plot(plot_, path);
          } catch (const std::exception& ex) {
            QMessageBox::warning(this, tr("Save plot"), QString::fromStdString(ex.what()));
          }
        }
      }
      return true;
    }
  }
  return QWidget::eventFilter(o, e);
}

}  // namespace remat::gui
