// The memory timeline's focus, offscreen on a real tiny run: a legend click hides a category and
// refits the byte axis, "Activations only" hides the four static categories and fits the
// activations' peak, the hover's largest tensors are those of shown categories, and the wheel
// over the byte axis (or Ctrl+wheel) zooms bytes while the plain wheel zooms time; "Alive at the
// peak" (the button, or a click on the peak's marker) lists the tensors alive at the peak, their
// bytes in the table summing to the peak.
#include <QLabel>
#include <QMouseEvent>
#include <QTableWidget>
#include <QToolButton>
#include <QtTest>
#include <qcustomplot.h>

#include "gui_test_util.h"
#include "views/memory_timeline_view.h"
#include "views/peak_dialog.h"
#include "views/op_timeline_view.h"
#include "views/run_view.h"

using namespace remat;
using namespace remat::gui;

namespace {

QCPGraph* graph_named(QCustomPlot* p, const QString& name) {
  for (int i = 0; i < p->graphCount(); ++i)
    if (p->graph(i)->name() == name) return p->graph(i);
  return nullptr;
}

double graph_max(QCPGraph* g) {
  double m = 0;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) m = std::max(m, it->value);
  return m;
}

void wheel(QWidget* w, QPoint at, Qt::KeyboardModifiers mods = {}) {
  QWheelEvent e(at, w->mapToGlobal(at), QPoint(), QPoint(0, 120), Qt::NoButton, mods, Qt::NoScrollPhase, false);
  QCoreApplication::sendEvent(w, &e);
}

constexpr Category kStatic[] = {Category::Parameters, Category::Gradients, Category::MasterWeights,
                                Category::OptimizerState};

}  // namespace

class GuiMemoryFocusTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void legendClickHidesACategoryAndRefitsTheByteAxis();
  void activationsOnlyHidesTheStaticCategoriesAndFitsTheActivationsPeak();
  void largestAliveLeavesHiddenCategoriesOut();
  void wheelOverTheByteAxisZoomsBytesNotTime();
  void thePeakListsWhatIsAliveThen();

 private:
  std::shared_ptr<const Trace> none_;
};

void GuiMemoryFocusTest::initTestCase() {
  testing::isolate_settings();
  none_ = testing::train("tiny", "none");
  QVERIFY(none_->complete);
}

void GuiMemoryFocusTest::legendClickHidesACategoryAndRefitsTheByteAxis() {
  MemoryTimelineView v;
  v.resize(1200, 500);
  v.show();
  v.setTrace(none_, "none");
  v.plot()->replot(QCustomPlot::rpImmediateRefresh);
  const double whole = v.plot()->yAxis->range().upper;
  QCOMPARE(whole, v.dataValueMax());
  QCPGraph* saved = graph_named(v.plot(), "saved activations");
  QVERIFY(saved);
  QCPAbstractLegendItem* item = v.legendItem(Category::SavedActivations);
  QVERIFY(item);
  const QColor shown_color = static_cast<QCPPlottableLegendItem*>(item)->textColor();
  // A click on its legend item hides the category, greys the item, and fits the rest.
  QTest::mouseClick(v.plot(), Qt::LeftButton, {}, item->rect().center());
  QVERIFY(!v.shownCategories()[static_cast<int>(Category::SavedActivations)]);
  QVERIFY(!saved->visible());
  QVERIFY(static_cast<QCPPlottableLegendItem*>(item)->textColor() != shown_color);
  const double without_saved = testing::fitted_top(*none_, [](Category c) { return c != Category::SavedActivations; });
  QCOMPARE(v.plot()->yAxis->range().lower, 0.0);
  QCOMPARE(v.plot()->yAxis->range().upper, without_saved);
  QVERIFY(without_saved < whole);
  QCPGraph* total = graph_named(v.plot(), "device total");
  QVERIFY(!total->visible());  // the total is no longer what is stacked: not drawn, greyed
  QVERIFY(v.plot()->legend->itemWithPlottable(total)->textColor() != shown_color);
  // Hiding the optimizer state too lowers the top again.
  v.setCategoryShown(Category::OptimizerState, false);
  QCOMPARE(v.plot()->yAxis->range().upper, testing::fitted_top(*none_, [](Category c) {
             return c != Category::SavedActivations && c != Category::OptimizerState;
           }));
  // The choice survives a rebuild (time mode) and the same run shown again, not another run.
  v.setTimeMode(TimeMode::Normalized);
  QVERIFY(!v.shownCategories()[static_cast<int>(Category::SavedActivations)]);
  v.setTrace(none_, "none");
  QVERIFY(!v.shownCategories()[static_cast<int>(Category::OptimizerState)]);
  v.setCategoryShown(Category::OptimizerState, true);
  // A second click shows it again: the whole range back.
  v.plot()->replot(QCustomPlot::rpImmediateRefresh);
  item = v.legendItem(Category::SavedActivations);
  QTest::mouseClick(v.plot(), Qt::LeftButton, {}, item->rect().center());
  QVERIFY(shows_all(v.shownCategories()));
  QVERIFY(graph_named(v.plot(), "saved activations")->visible());
  QCOMPARE(v.plot()->yAxis->range().upper, whole);
  v.setCategoryShown(Category::Checkpoints, false);
  v.setTrace(std::make_shared<Trace>(*none_), "a copy");
  QVERIFY(shows_all(v.shownCategories()));
}

void GuiMemoryFocusTest::activationsOnlyHidesTheStaticCategoriesAndFitsTheActivationsPeak() {
  MemoryTimelineView v;
  v.resize(1200, 500);
  v.show();
  v.setTrace(none_, "none");
  QToolButton* b = v.activationsOnlyButton();
  QVERIFY(b->isVisible());
  // The button's row above the plot takes only its own height.
  QVERIFY(b->parentWidget()->height() < 2 * b->sizeHint().height());
  QVERIFY(v.plot()->height() > v.height() - 2 * b->sizeHint().height());
  QTest::mouseClick(b, Qt::LeftButton);
  QVERIFY(b->isChecked());
  for (Category c : kStatic) {
    QVERIFY2(!v.shownCategories()[static_cast<int>(c)], to_string(c));
    if (QCPGraph* g = graph_named(v.plot(), QString(to_string(c)).replace('_', ' '))) QVERIFY(!g->visible());
  }
  QVERIFY(graph_named(v.plot(), "parameters"));
  QVERIFY(graph_named(v.plot(), "optimizer state"));
  // Fitted to the activations' own peak, stacked from 0: the top visible area reaches it.
  const double peak = testing::fitted_top(*none_, [](Category c) { return !is_static(c); }) / 1.15;
  QVERIFY(peak > 0);
  QCOMPARE(v.plot()->yAxis->range().lower, 0.0);
  QCOMPARE(v.plot()->yAxis->range().upper, 1.15 * peak);
  double top = 0;
  for (int i = 0; i < v.plot()->graphCount(); ++i) {
    QCPGraph* g = v.plot()->graph(i);
    if (g->visible() && g->name() != "device total") top = std::max(top, graph_max(g));
  }
  QCOMPARE(top, peak);
  // Off again: everything, the device total on top.
  QTest::mouseClick(b, Qt::LeftButton);
  QVERIFY(shows_all(v.shownCategories()));
  QCOMPARE(v.plot()->yAxis->range().upper, v.dataValueMax());
  QCOMPARE(v.plottedMaximum(), static_cast<double>(none_->peak_bytes));
  // A legend click that leaves exactly the activations checks the button.
  for (Category c : kStatic) v.setCategoryShown(c, false);
  QVERIFY(b->isChecked());
  // The compare view's compact plot has no focus bar.
  v.setCompact(true);
  QVERIFY(!b->isVisible());
}

void GuiMemoryFocusTest::largestAliveLeavesHiddenCategoriesOut() {
  MemoryTimelineView v;
  v.resize(1200, 500);
  v.show();
  v.setTrace(none_, "none");
  const MemoryTimeline tl = memory_timeline(*none_);
  // Points where a static tensor is among the five largest alive, with every category shown.
  const LiveTensorIndex labels(*none_);
  int checked = 0;
  for (std::size_t i = 0; i < tl.points.size() && checked < 20; i += 7) {
    const double key = static_cast<double>(tl.points[i].t_ns - v.origin());
    v.setActivationsOnly(false);
    const auto all = v.largestAt(key, 5);
    if (std::none_of(all.begin(), all.end(), [](const Allocation* a) { return is_static(a->category); })) continue;
    std::int64_t activations = 0;
    for (int c = 0; c < kNumCategories; ++c)
      if (!is_static(static_cast<Category>(c))) activations += tl.points[i].live[c];
    if (activations == 0) continue;
    v.setActivationsOnly(true);
    const auto act = v.largestAt(key, 5);
    QVERIFY(!act.empty());
    for (const Allocation* a : act) QVERIFY2(!is_static(a->category), to_string(a->category));
    const QString hover = v.describeAt(key);
    QVERIFY(hover.contains("largest alive"));
    for (const Allocation* a : all)
      if (is_static(a->category)) QVERIFY(!hover.contains("<td>" + QString::fromStdString(labels.label(*a)) + "</td>"));
    for (const Allocation* a : act) QVERIFY(hover.contains("<td>" + QString::fromStdString(labels.label(*a)) + "</td>"));
    QCOMPARE(v.tensorsAt(key, 5).size(), static_cast<int>(act.size()));
    ++checked;
  }
  QVERIFY(checked > 0);
  // A hidden activation category is left out as well.
  v.setActivationsOnly(false);
  v.setCategoryShown(Category::SavedActivations, false);
  const double key = static_cast<double>(tl.points[tl.peak_point].t_ns - v.origin());
  const auto rest = v.largestAt(key, 8);
  QVERIFY(!rest.empty());
  for (const Allocation* a : rest) QVERIFY(a->category != Category::SavedActivations);
}

void GuiMemoryFocusTest::wheelOverTheByteAxisZoomsBytesNotTime() {
  RunView view;
  view.resize(1200, 800);
  view.show();
  view.setTrace(none_, "none");
  QVERIFY(testing::wait_loaded(view));
  MemoryTimelineView* m = view.memory();
  QCustomPlot* p = m->plot();
  p->replot(QCustomPlot::rpImmediateRefresh);
  const QRect ar = p->axisRect()->rect();
  const QCPRange x0 = p->xAxis->range(), y0 = p->yAxis->range();
  // Over the byte axis: bytes zoom in, time stays.
  wheel(p, QPoint(ar.left() - 30, ar.center().y()));
  const QCPRange y1 = p->yAxis->range();
  QVERIFY(y1.size() < y0.size());
  QCOMPARE(p->xAxis->range().lower, x0.lower);
  QCOMPARE(p->xAxis->range().upper, x0.upper);
  QVERIFY(y1.lower >= 0);
  // Ctrl+wheel anywhere over the plot: bytes again.
  wheel(p, ar.center(), Qt::ControlModifier);
  QVERIFY(p->yAxis->range().size() < y1.size());
  QCOMPARE(p->xAxis->range().lower, x0.lower);
  QCOMPARE(p->xAxis->range().upper, x0.upper);
  // The plain wheel: time zooms, bytes stay, and the op timeline follows.
  const QCPRange y2 = p->yAxis->range();
  wheel(p, ar.center());
  QVERIFY(p->xAxis->range().size() < x0.size());
  QCOMPARE(p->yAxis->range().lower, y2.lower);
  QCOMPARE(p->yAxis->range().upper, y2.upper);
  QCOMPARE(view.ops()->plot()->xAxis->range().lower, p->xAxis->range().lower);
  QCOMPARE(view.ops()->plot()->xAxis->range().upper, p->xAxis->range().upper);
  // Reset zoom: both axes whole again.
  m->resetZoom();
  QCOMPARE(p->yAxis->range().upper, y0.upper);
  QCOMPARE(p->xAxis->range().upper, x0.upper);
}

void GuiMemoryFocusTest::thePeakListsWhatIsAliveThen() {
  MemoryTimelineView v;
  QVERIFY(!v.peakButton()->isEnabled());
  QVERIFY(!v.showPeakAlive());
  v.resize(1280, 500);
  v.show();
  v.setTrace(none_, "none");
  QVERIFY(v.peakButton()->isEnabled());
  // The button opens it.
  QTest::mouseClick(v.peakButton(), Qt::LeftButton);
  auto dialogs = v.findChildren<PeakAliveDialog*>();
  QCOMPARE(dialogs.size(), 1);
  PeakAliveDialog* d = dialogs.front();
  QTableWidget* table = d->table();
  QCOMPARE(table->rowCount(), static_cast<int>(d->peak().tensors.size()));
  QVERIFY(table->rowCount() > 0);
  qulonglong sum = 0;
  for (int r = 0; r < table->rowCount(); ++r) {
    const QString exact = table->item(r, 1)->toolTip();  // "N B"
    sum += exact.section(' ', 0, 0).toULongLong();
    QVERIFY(!table->item(r, 6)->text().isEmpty());
  }
  QCOMPARE(sum, static_cast<qulonglong>(none_->peak_bytes));
  QVERIFY2(d->header()->text().contains("the peak exactly"), qPrintable(d->header()->text()));
  QVERIFY2(d->header()->text().contains(QString("%1 tensors").arg(table->rowCount())), qPrintable(d->header()->text()));
  // Largest first.
  QCOMPARE(table->item(0, 1)->toolTip(), QString("%1 B").arg(d->peak().tensors.front().bytes));
  d->close();
  QCoreApplication::sendPostedEvents(nullptr, QEvent::DeferredDelete);
  QVERIFY(v.findChildren<PeakAliveDialog*>().isEmpty());

  // A click on the peak's marker opens it too; a click elsewhere does not.
  QCustomPlot* p = v.plot();
  p->replot();
  const MemoryTimeline tl = memory_timeline(*none_);
  const double key = static_cast<double>(tl.points[tl.peak_point].t_ns - v.origin());
  const QPoint at(static_cast<int>(p->xAxis->coordToPixel(key)),
                  static_cast<int>(p->yAxis->coordToPixel(static_cast<double>(none_->peak_bytes))));
  QTest::mouseClick(p, Qt::LeftButton, {}, at + QPoint(0, 60));
  QVERIFY(v.findChildren<PeakAliveDialog*>().isEmpty());
  QTest::mouseClick(p, Qt::LeftButton, {}, at);
  QCOMPARE(v.findChildren<PeakAliveDialog*>().size(), 1);
}

QTEST_MAIN(GuiMemoryFocusTest)
#include "gui_memory_focus_test.moc"
