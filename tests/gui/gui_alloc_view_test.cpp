// The memory timeline's allocations view, offscreen on a real tiny run: the mode buttons switch
// between the stacked categories and the bands; a legend click removes a category's bands (no
// pixel of its color left in the plot) and refits the byte axis to the rest; the hover names the
// allocation under the mouse and a click pins it and picks its tensor.
#include <QLabel>
#include <cmath>
#include <QSignalSpy>
#include <QToolButton>
#include <QtTest>
#include <qcustomplot.h>

#include "gui_test_util.h"
#include "theme.h"
#include "views/alloc_bands_plottable.h"
#include "views/memory_timeline_view.h"

using namespace remat;
using namespace remat::gui;

namespace {

// Pixels of the plot's axis rect painted exactly in `color`.
int pixels_of(MemoryTimelineView& v, const QColor& color) {
  v.plot()->replot(QCustomPlot::rpImmediateRefresh);
  const QImage img = v.plot()->toPixmap().toImage();
  const QRect r = v.plot()->axisRect()->rect();
  const QRgb want = color.rgb();
  int n = 0;
  for (int y = r.top(); y <= r.bottom(); ++y)
    for (int x = r.left(); x <= r.right(); ++x)
      if ((img.pixel(x, y) & 0xffffff) == (want & 0xffffff)) ++n;
  return n;
}

bool has_bands_of(const AllocBandsPlottable* p, Category c) {
  const AllocLayout& L = p->layout();
  for (std::uint32_t k : L.big)
    if (p->bands()->bands()[k].a.category == c) return true;
  return std::find(L.small_categories.begin(), L.small_categories.end(), c) != L.small_categories.end();
}

}  // namespace

class GuiAllocViewTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void theModeButtonsSwitchBetweenStackedAndAllocations();
  void aLegendClickRemovesTheCategorysBandsAndRefitsTheByteAxis();
  void hoverNamesTheBandUnderTheMouseAndAClickPinsIt();
  void theClickedAllocationsDetailsAreWhole();
  void theCrosshairLeavesWithTheMouse();

 private:
  std::shared_ptr<const Trace> none_;
};

void GuiAllocViewTest::initTestCase() {
  testing::isolate_settings();
  none_ = testing::train("tiny", "none");
  QVERIFY(none_->complete);
}

void GuiAllocViewTest::theModeButtonsSwitchBetweenStackedAndAllocations() {
  MemoryTimelineView v;
  v.resize(1200, 500);
  v.show();
  v.setTrace(none_, "none");
  QCOMPARE(v.memoryMode(), MemoryMode::Stacked);
  QVERIFY(!v.allocations()->visible());
  QToolButton* alloc = nullptr;
  for (QToolButton* b : v.findChildren<QToolButton*>())
    if (b->text() == "Allocations") alloc = b;
  QVERIFY(alloc);
  QTest::mouseClick(alloc, Qt::LeftButton);
  QCOMPARE(v.memoryMode(), MemoryMode::Allocations);
  QVERIFY(v.allocations()->visible());
  QVERIFY(v.allocations()->bands());
  // No category's stacked area is drawn.
  int stacked_visible = 0, stacked = 0;
  for (int i = 0; i < v.plot()->graphCount(); ++i)
    if (category_from_string(v.plot()->graph(i)->name().replace(' ', '_').toStdString())) {
      ++stacked;
      if (v.plot()->graph(i)->visible()) ++stacked_visible;
    }
  QVERIFY(stacked >= 4);
  QCOMPARE(stacked_visible, 0);
  v.plot()->replot(QCustomPlot::rpImmediateRefresh);
  QVERIFY(v.allocations()->lastDrawn() > 10);
  // The same fitted byte axis as the stacked view, the top of the bands at the peak.
  QCOMPARE(v.plot()->yAxis->range().upper, v.dataValueMax());
  const AllocLayout& L = v.allocations()->layout();
  auto per_time = testing::stacked_per_time(*none_, [](Category) { return true; });
  per_time.erase(std::prev(per_time.end()));  // the step's end: nothing is alive at it
  QVERIFY(per_time.size() > 100);
  for (const auto& [t, live] : per_time) QCOMPARE(L.top(t), live);
  // A new run keeps the mode and lays out its own bands.
  v.setTrace(std::make_shared<Trace>(*none_), "a copy");
  QCOMPARE(v.memoryMode(), MemoryMode::Allocations);
  QVERIFY(v.allocations()->bands());
  v.setMemoryMode(MemoryMode::Stacked);
  QVERIFY(!v.allocations()->visible());
  QVERIFY(!alloc->isChecked());
}

void GuiAllocViewTest::aLegendClickRemovesTheCategorysBandsAndRefitsTheByteAxis() {
  MemoryTimelineView v;
  v.resize(1200, 500);
  v.show();
  v.setTrace(none_, "none");
  v.setMemoryMode(MemoryMode::Allocations);
  v.plot()->replot(QCustomPlot::rpImmediateRefresh);
  const double whole = v.plot()->yAxis->range().upper;
  const Category c = Category::OptimizerState;
  QVERIFY(has_bands_of(v.allocations(), c));
  QVERIFY(pixels_of(v, category_color(c)) > 500);
  QCPAbstractLegendItem* item = v.legendItem(c);
  QVERIFY(item);
  QTest::mouseClick(v.plot(), Qt::LeftButton, {}, item->rect().center());
  QVERIFY(!v.shownCategories()[static_cast<int>(c)]);
  QVERIFY(!has_bands_of(v.allocations(), c));
  QCOMPARE(pixels_of(v, category_color(c)), 0);
  QVERIFY(pixels_of(v, category_color(Category::Parameters)) > 0);
  const double rest = testing::fitted_top(*none_, [c](Category k) { return k != c; });
  QCOMPARE(v.plot()->yAxis->range().upper, rest);
  QVERIFY(rest < whole);
  // Activations only: no static category's band, the top of the bands the activations' peak.
  v.setActivationsOnly(true);
  for (Category s : {Category::Parameters, Category::Gradients, Category::OptimizerState})
    QVERIFY2(!has_bands_of(v.allocations(), s), to_string(s));
  const double act = testing::fitted_top(*none_, [](Category k) { return !is_static(k); });
  QCOMPARE(v.plot()->yAxis->range().upper, act);
  double highest = 0, want = 0;
  for (const auto& [t, live] : testing::stacked_per_time(*none_, [](Category k) { return !is_static(k); })) {
    highest = std::max(highest, v.allocations()->layout().top(t));
    want = std::max(want, live);
  }
  QVERIFY(highest > 0);
  QCOMPARE(highest, want);
  // The second click shows it again.
  v.setActivationsOnly(false);
  QVERIFY(has_bands_of(v.allocations(), c));
  QCOMPARE(v.plot()->yAxis->range().upper, whole);
}

void GuiAllocViewTest::hoverNamesTheBandUnderTheMouseAndAClickPinsIt() {
  MemoryTimelineView v;
  v.resize(1200, 500);
  v.show();
  v.setTrace(none_, "none");
  v.setMemoryMode(MemoryMode::Allocations);
  v.setActivationsOnly(true);
  v.plot()->replot(QCustomPlot::rpImmediateRefresh);
  const AllocBandsPlottable* p = v.allocations();
  const AllocLayout& L = p->layout();
  // Among the bands at least 6 px high and 20 px long, several at different places.
  QCPAxis* x = v.plot()->xAxis;
  QCPAxis* y = v.plot()->yAxis;
  int checked = 0;
  QSignalSpy picked(&v, &MemoryTimelineView::tensorsPicked);
  for (std::size_t r = 0; r < L.size() && checked < 6; r += 3) {
    const AllocBand& b = p->bands()->bands()[L.big[r]];
    const std::int64_t mid = b.t0 + (b.t1 - b.t0) / 2;
    const double x0 = x->coordToPixel(static_cast<double>(b.t0 - v.origin()));
    const double x1 = x->coordToPixel(static_cast<double>(b.t1 - v.origin()));
    const double bottom = L.bottom(r, mid), h = static_cast<double>(b.a.bytes);
    if (x1 - x0 < 20 || y->coordToPixel(bottom) - y->coordToPixel(bottom + h) < 6) continue;
    const QPointF at(x->coordToPixel(static_cast<double>(mid - v.origin())), y->coordToPixel(bottom + h / 2));
    const QString label = QString::fromStdString(p->bands()->label(b)).toHtmlEscaped();
    const QString hover = v.describeAllocationAt(at);
    QVERIFY2(hover.contains("<b>" + label + "</b>"), qPrintable(label + " not in " + hover));
    QVERIFY(hover.contains(QString(to_string(b.a.category)).replace('_', ' ')));
    // A click pins it: its details above the plot, its tensor picked for the ledger.
    QTest::mouseClick(v.plot(), Qt::LeftButton, {}, at.toPoint());
    QCOMPARE(p->pinned(), static_cast<std::size_t>(L.big[r]));
    QVERIFY(v.pinnedLabel()->text().contains(label));
    QVERIFY(!picked.isEmpty());
    const auto tensors = picked.takeLast().at(0).value<QList<QPair<int, QString>>>();
    QCOMPARE(tensors.size(), 1);
    QCOMPARE(tensors[0].first, b.a.block);
    QCOMPARE(tensors[0].second, QString::fromStdString(p->bands()->tensorName(b)));
    ++checked;
  }
  QVERIFY(checked >= 3);
  // Above the stack: nothing; a click there unpins.
  const QPointF empty(x->coordToPixel(x->range().center()), y->coordToPixel(y->range().upper * 0.99));
  QVERIFY(v.describeAllocationAt(empty).isEmpty());
  QTest::mouseClick(v.plot(), Qt::LeftButton, {}, empty.toPoint());
  QCOMPARE(p->pinned(), static_cast<std::size_t>(AllocBands::npos));
  QVERIFY(v.pinnedLabel()->text().isEmpty());
}

void GuiAllocViewTest::theClickedAllocationsDetailsAreWhole() {
  MemoryTimelineView v;
  v.resize(1000, 520);  // the memory plot's width in the window at 1280x800
  v.show();
  QVERIFY(QTest::qWaitForWindowExposed(&v));
  v.setTrace(none_, "none");
  v.setMemoryMode(MemoryMode::Allocations);
  v.plot()->replot(QCustomPlot::rpImmediateRefresh);
  QVERIFY(!v.pinnedLabel()->isVisible());  // nothing clicked: no empty line
  const AllocBandsPlottable* p = v.allocations();
  const AllocLayout& L = p->layout();
  QCPAxis* x = v.plot()->xAxis;
  QCPAxis* y = v.plot()->yAxis;
  int checked = 0;
  for (std::size_t r = 0; r < L.size() && checked < 4; r += 2) {
    const AllocBand& b = p->bands()->bands()[L.big[r]];
    const std::int64_t mid = b.t0 + (b.t1 - b.t0) / 2;
    const double bottom = L.bottom(r, mid), h = static_cast<double>(b.a.bytes);
    if (x->coordToPixel(static_cast<double>(b.t1 - v.origin())) - x->coordToPixel(static_cast<double>(b.t0 - v.origin())) < 20 ||
        y->coordToPixel(bottom) - y->coordToPixel(bottom + h) < 6)
      continue;
    QTest::mouseClick(v.plot(), Qt::LeftButton, {},
                      QPoint(static_cast<int>(x->coordToPixel(static_cast<double>(mid - v.origin()))),
                             static_cast<int>(y->coordToPixel(bottom + h / 2))));
    QApplication::processEvents();
    QLabel* l = v.pinnedLabel();
    QVERIFY(!l->text().isEmpty());
    QVERIFY(l->isVisible());
    // Every line of it inside the label: as high as its text needs at its width, no wider than
    // the view.
    QVERIFY2(l->heightForWidth(l->width()) <= l->height(),
             qPrintable(QString("needs %1 px, has %2").arg(l->heightForWidth(l->width())).arg(l->height())));
    QVERIFY2(l->sizeHint().width() <= l->width() || l->wordWrap(),
             qPrintable(QString("needs %1 px wide, has %2").arg(l->sizeHint().width()).arg(l->width())));
    QVERIFY(l->geometry().right() <= v.width());
    ++checked;
  }
  QVERIFY(checked > 0);
  // Back to the stacked view: the line goes with the pin.
  v.setMemoryMode(MemoryMode::Stacked);
  QVERIFY(!v.pinnedLabel()->isVisible());
}

void GuiAllocViewTest::theCrosshairLeavesWithTheMouse() {
  MemoryTimelineView v;
  v.resize(1000, 520);
  v.show();
  QVERIFY(QTest::qWaitForWindowExposed(&v));
  v.setTrace(none_, "none");
  v.plot()->replot(QCustomPlot::rpImmediateRefresh);
  QSignalSpy moved(&v, &MemoryTimelineView::cursorMoved);
  const QRect ar = v.plot()->axisRect()->rect();
  QTest::mouseMove(v.plot(), ar.center());
  QApplication::processEvents();
  QVERIFY(v.cursorShown());
  QVERIFY(!moved.isEmpty());
  QVERIFY(!std::isnan(moved.last().at(0).toDouble()));
  // The pointer leaves the plot (to another window): the crosshair goes, the views that follow
  // it are told.
  QEvent leave(QEvent::Leave);
  QApplication::sendEvent(v.plot(), &leave);
  QVERIFY(!v.cursorShown());
  QVERIFY(std::isnan(moved.last().at(0).toDouble()));
}

QTEST_MAIN(GuiAllocViewTest)
#include "gui_alloc_view_test.moc"
