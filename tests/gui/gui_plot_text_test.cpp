// The text of the plots at 1280×800: every entry of the memory page's legend shows its whole
// name inside its item and the plot, and every chart title on the Compare page fits its element
// and the plot; both still hold when the plots are narrower.
#include <QFontMetricsF>
#include <QSignalSpy>
#include <QtTest>
#include <qcustomplot.h>

#include "gui_test_util.h"
#include "main_window.h"
#include "run_list.h"
#include "views/compare_charts.h"
#include "views/compare_view.h"
#include "views/memory_timeline_view.h"
#include "views/run_view.h"

using namespace remat;
using namespace remat::gui;

namespace {

QString str(const QRectF& r) { return QString("(%1,%2 %3x%4)").arg(r.x()).arg(r.y()).arg(r.width()).arg(r.height()); }

// Each legend item of `p` whose name does not fit its item's rect or the plot.
QStringList cut_legend_items(QCustomPlot* p) {
  QStringList out;
  QCPLegend* legend = p->legend;
  for (int i = 0; i < legend->itemCount(); ++i) {
    auto* it = qobject_cast<QCPPlottableLegendItem*>(legend->item(i));
    if (!it) continue;
    const QString name = it->plottable()->name();
    // Where QCPPlottableLegendItem draws the name: after the icon and its padding.
    const double left = it->rect().left() + legend->iconSize().width() + legend->iconTextPadding();
    const double right = left + QFontMetricsF(it->font()).horizontalAdvance(name);
    if (right > it->rect().right() + 1 || it->rect().right() > p->width())
      out << QString("'%1' ends at %2, its item %3 in a plot %4 wide").arg(name).arg(right).arg(str(it->rect())).arg(p->width());
  }
  return out;
}

// Each title (text element) of `p` wider than its element or reaching out of the plot.
QStringList cut_titles(QCustomPlot* p) {
  QStringList out;
  for (QCPLayoutElement* e : p->plotLayout()->elements(true)) {
    auto* t = qobject_cast<QCPTextElement*>(e);
    if (!t || !t->visible() || t->text().isEmpty()) continue;
    const QRectF need = QFontMetricsF(t->font()).boundingRect(QRectF(), Qt::TextDontClip, t->text());
    if (need.width() > t->rect().width() + 1 || t->rect().left() < 0 || t->rect().right() > p->width())
      out << QString("'%1' needs %2 px, its element %3 in a plot %4 wide").arg(t->text()).arg(need.width())
                 .arg(str(t->rect())).arg(p->width());
  }
  return out;
}

}  // namespace

class GuiPlotTextTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void memoryLegendShowsEveryNameAt1280x800();
  void compareTitlesFitAt1280x800();

 private:
  std::shared_ptr<const Trace> none_, uniform_;
  QTemporaryDir tmp_;
};

void GuiPlotTextTest::initTestCase() {
  testing::isolate_settings();
  none_ = testing::train("tiny", "none");
  uniform_ = testing::train("tiny", "uniform:segments=2");
  QVERIFY(none_->complete);
  QVERIFY(uniform_->complete);
}

void GuiPlotTextTest::memoryLegendShowsEveryNameAt1280x800() {
  MainWindow w(testing::window_options(tmp_, false, false));
  w.resize(1280, 800);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.showRun(w.runs()->add(none_, {}));
  QVERIFY(testing::wait_loaded(*w.runView()));
  QCOMPARE(w.size(), QSize(1280, 800));
  MemoryTimelineView* m = w.runView()->memory();
  QVERIFY(m->isVisible());
  QCustomPlot* p = m->plot();
  // The page as shown, then narrower plots (the side panels dragged wider).
  for (int width : {p->width(), 640, 420}) {
    p->setFixedWidth(width);
    QApplication::processEvents();
    p->replot(QCustomPlot::rpImmediateRefresh);
    QVERIFY2(p->legend->itemCount() >= 10, qPrintable(QString("%1 legend items").arg(p->legend->itemCount())));
    const QStringList cut = cut_legend_items(p);
    QVERIFY2(cut.isEmpty(), qPrintable(QString("plot %1 px wide: ").arg(p->width()) + cut.join("; ")));
  }
}

void GuiPlotTextTest::compareTitlesFitAt1280x800() {
  MainWindow w(testing::window_options(tmp_, false, false));
  w.resize(1280, 800);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.runs()->add(none_, {});
  w.showRun(w.runs()->add(uniform_, {}));
  w.pages()->setCurrentWidget(w.compareView());
  QApplication::processEvents();
  QCOMPARE(w.size(), QSize(1280, 800));
  CompareView* c = w.compareView();
  QVERIFY(c->timeChart());
  QVERIFY(c->timeChart()->isVisible());
  int titles = 0;
  QStringList cut;
  for (QCustomPlot* p : c->findChildren<QCustomPlot*>()) {
    if (!p->isVisible()) continue;
    p->replot(QCustomPlot::rpImmediateRefresh);
    for (QCPLayoutElement* e : p->plotLayout()->elements(true))
      if (auto* t = qobject_cast<QCPTextElement*>(e); t && t->visible() && !t->text().isEmpty()) ++titles;
    cut << cut_titles(p);
  }
  // The two timelines' titles and the three charts'.
  QVERIFY2(titles >= 5, qPrintable(QString("%1 titles").arg(titles)));
  QVERIFY2(cut.isEmpty(), qPrintable(cut.join("; ")));
}

QTEST_MAIN(GuiPlotTextTest)
#include "gui_plot_text_test.moc"
