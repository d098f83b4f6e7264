#include "views/plot_view.h"

#include <QContextMenuEvent>
#include <QFileDialog>
#include <QMenu>
#include <QMessageBox>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "export.h"
#include "theme.h"

namespace remat::gui {

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
  plot_->replot();
}

void PlotView::changeEvent(QEvent* e) {
  if (e->type() == QEvent::PaletteChange) restyle();
  QWidget::changeEvent(e);
}

bool PlotView::eventFilter(QObject* o, QEvent* e) {
  if (o == plot_) {
    if (e->type() == QEvent::MouseButtonPress || e->type() == QEvent::Wheel) emit activated(plot_);
    if (e->type() == QEvent::ContextMenu) {
      auto* ce = static_cast<QContextMenuEvent*>(e);
      QMenu menu(this);
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
