// Keyboard navigation and the shortcut table, offscreen: every menu shortcut comes from the one
// table, which F1 and docs/gui.md show row for row; W / S / A / D and the arrow keys zoom and pan
// the run's time views (around the mouse when it is over the plot, the others following), never
// while a field has the focus; F zooms to the clicked op or the selected range and M marks it on
// every time view of the run, M again unmarks.
#include <QAction>
#include <QFile>
#include <QLineEdit>
#include <QMouseEvent>
#include <QRegularExpression>
#include <QShortcut>
#include <QTabWidget>
#include <QtTest>
#include <set>
#include <qcustomplot.h>

#include "gui_test_util.h"
#include "main_window.h"
#include "shortcuts.h"
#include "views/memory_timeline_view.h"
#include "views/op_timeline_pane.h"
#include "views/op_timeline_view.h"
#include "views/run_view.h"
#include "views/schedule_strip.h"

using namespace remat;
using namespace remat::gui;

// a == b to a relative 1e-9, else the test fails here.
#define NEAR(a, b)                                                                                     \
  do {                                                                                                 \
    const double a_ = (a), b_ = (b);                                                                   \
    QVERIFY2(std::abs(a_ - b_) <= 1e-9 * std::max({std::abs(a_), std::abs(b_), 1.0}),                 \
             qPrintable(QString("%1 != %2").arg(a_, 0, 'g', 17).arg(b_, 0, 'g', 17)));                \
  } while (0)

class GuiNavigationTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    testing::isolate_settings();
    trace_ = testing::train("tiny", "uniform:segments=2", 1);
  }
  void everyMenuShortcutIsInTheTable();
  void theHelpAndTheDocsShowTheTable();
  void keysZoomAndPanTheTimeViews();
  void keysZoomAroundTheMouse();
  void aFieldKeepsItsKeys();
  void focusAndMarkTheSelection();
  void theSidePanelKeepsItsWidthAcrossTabs();

 private:
  void showRun(RunView& v) {
    v.resize(1280, 800);
    v.show();
    v.setTrace(trace_, "tiny");
    QVERIFY(testing::wait_loaded(v));
    QVERIFY(QTest::qWaitForWindowExposed(&v));
  }
  static QCPRange range(const PlotView* v) { return v->plot()->xAxis->range(); }
  std::shared_ptr<const Trace> trace_;
};

void GuiNavigationTest::everyMenuShortcutIsInTheTable() {
  std::set<QString> ids, keys;
  for (const Shortcut& s : shortcut_table()) {
    QVERIFY2(!QString(s.keys).isEmpty() && !QString(s.action).isEmpty(), s.id);
    QVERIFY2(keys.insert(s.keys).second, s.keys);  // each keys once
    if (!*s.id) continue;
    QVERIFY2(ids.insert(s.id).second, s.id);
    const QKeySequence k = shortcut_key(s.id);
    QVERIFY2(!k.isEmpty(), s.keys);
    QCOMPARE(k.toString(QKeySequence::PortableText), QString(s.keys));
  }
  QVERIFY(shortcut_key("no such id").isEmpty());

  QTemporaryDir dir;
  MainWindow w(testing::window_options(dir));
  std::set<QString> bound;
  for (QAction* a : w.findChildren<QAction*>()) {
    if (a->shortcut().isEmpty()) continue;
    const QString k = a->shortcut().toString(QKeySequence::PortableText);
    QVERIFY2(keys.count(k), qPrintable(a->text() + " has " + k + ", which the table does not list"));
    QVERIFY2(bound.insert(k).second, qPrintable(k + " is bound twice"));
  }
  for (QShortcut* s : w.findChildren<QShortcut*>()) bound.insert(s->key().toString(QKeySequence::PortableText));
  for (const Shortcut& s : shortcut_table())
    if (*s.id) QVERIFY2(bound.count(s.keys), qPrintable(QString(s.keys) + " is in the table but bound to nothing"));
}

void GuiNavigationTest::theHelpAndTheDocsShowTheTable() {
  QFile f(QString::fromUtf8(REMAT_SOURCE_DIR) + "/docs/gui.md");
  QVERIFY(f.open(QIODevice::ReadOnly));
  const QString doc = QString::fromUtf8(f.readAll());
  const qsizetype from = doc.indexOf("## Keyboard shortcuts"), to = doc.indexOf("\n## ", from + 1);
  QVERIFY(from >= 0 && to > from);
  QStringList rows;
  for (const QString& line : doc.mid(from, to - from).split('\n'))
    if (line.startsWith("| ") && !line.startsWith("| Keys |")) rows << line;
  QStringList expected;
  for (const Shortcut& s : shortcut_table()) expected << QString("| %1 | %2 |").arg(s.keys, s.action);
  QCOMPARE(rows, expected);

  const QString html = shortcuts_html();
  for (const Shortcut& s : shortcut_table()) {
    QString action = QString(s.action).toHtmlEscaped().remove('`');
    QVERIFY2(html.contains(action), qPrintable(action));
    for (const QString& k : QString(s.keys).split(" / "))
      QVERIFY2(html.contains("<b>" + k.toHtmlEscaped() + "</b>"), qPrintable(k));
  }
  // The keys the F1 list once left out.
  for (const char* k : {"Ctrl+F", "Enter", "Shift+Enter", "Shift+drag", "Shift+click", "Ctrl+Alt+O", "Ctrl+Q", "W", "M"})
    QVERIFY2(html.contains(QString("<b>%1</b>").arg(k)), k);
}

void GuiNavigationTest::keysZoomAndPanTheTimeViews() {
  RunView v;
  showRun(v);
  MemoryTimelineView* mem = v.memory();
  const QCPRange full = range(mem);
  QVERIFY(full.size() > 0);
  QTest::keyClick(mem->plot(), Qt::Key_W);
  NEAR(range(mem).size(), 0.8 * full.size());
  NEAR(range(mem).center(), full.center());
  QTest::keyClick(mem->plot(), Qt::Key_W);
  QTest::keyClick(mem->plot(), Qt::Key_W);
  const QCPRange r = range(mem);
  NEAR(r.size(), 0.512 * full.size());
  // The other time views follow.
  NEAR(range(v.ops()).lower, r.lower);
  NEAR(range(v.ops()).upper, r.upper);
  NEAR(range(v.schedule()).upper, r.upper);
  QTest::keyClick(mem->plot(), Qt::Key_D);
  NEAR(range(mem).lower, r.lower + 0.2 * r.size());
  NEAR(range(mem).size(), r.size());
  QTest::keyClick(mem->plot(), Qt::Key_A);
  NEAR(range(mem).lower, r.lower);
  QTest::keyClick(mem->plot(), Qt::Key_Right);
  NEAR(range(mem).lower, r.lower + 0.2 * r.size());
  QTest::keyClick(mem->plot(), Qt::Key_Left);
  NEAR(range(mem).lower, r.lower);
  // Panning stops at the end of the step.
  for (int i = 0; i < 10; ++i) QTest::keyClick(mem->plot(), Qt::Key_D);
  NEAR(range(mem).upper, full.upper);
  NEAR(range(mem).size(), r.size());
  // On the op timeline as well, and the memory timeline follows it.
  QTest::keyClick(v.ops()->plot(), Qt::Key_Up);
  NEAR(range(v.ops()).size(), 0.8 * r.size());
  NEAR(range(mem).size(), 0.8 * r.size());
  QTest::keyClick(v.ops()->plot(), Qt::Key_Down);
  NEAR(range(mem).size(), r.size());
  for (int i = 0; i < 3; ++i) QTest::keyClick(v.ops()->plot(), Qt::Key_S);
  NEAR(range(mem).size(), full.size());
  // With Ctrl the keys are not navigation.
  const QCPRange before = range(mem);
  QTest::keyClick(mem->plot(), Qt::Key_W, Qt::ControlModifier);
  QTest::keyClick(mem->plot(), Qt::Key_D, Qt::AltModifier);
  NEAR(range(mem).lower, before.lower);
  NEAR(range(mem).upper, before.upper);
}

void GuiNavigationTest::keysZoomAroundTheMouse() {
  RunView v;
  showRun(v);
  QCustomPlot* p = v.memory()->plot();
  const QRect ar = p->axisRect()->rect();
  const double px = ar.left() + 0.3 * ar.width();
  const double at = p->xAxis->pixelToCoord(px);
  QMouseEvent move(QEvent::MouseMove, QPointF(px, ar.center().y()), p->mapToGlobal(QPointF(px, ar.center().y())),
                   Qt::NoButton, Qt::NoButton, Qt::NoModifier);
  QApplication::sendEvent(p, &move);
  const double size = p->xAxis->range().size();
  QTest::keyClick(p, Qt::Key_W);
  NEAR(p->xAxis->range().size(), 0.8 * size);
  NEAR(p->xAxis->pixelToCoord(px), at);  // the time under the mouse stays under it
  // Once the mouse has left, the middle again.
  QEvent leave(QEvent::Leave);
  QApplication::sendEvent(p, &leave);
  const QCPRange r = p->xAxis->range();
  QTest::keyClick(p, Qt::Key_W);
  NEAR(p->xAxis->range().center(), r.center());
}

void GuiNavigationTest::aFieldKeepsItsKeys() {
  RunView v;
  showRun(v);
  const QCPRange before = range(v.memory());
  QLineEdit* search = v.opPane()->searchBox();
  search->setFocus();
  QTest::keyClicks(search, "wasd");
  QCOMPARE(search->text(), QString("wasd"));
  NEAR(range(v.memory()).lower, before.lower);
  NEAR(range(v.memory()).upper, before.upper);
}

void GuiNavigationTest::focusAndMarkTheSelection() {
  RunView v;
  showRun(v);
  OpTimelineView* ops = v.ops();
  MemoryTimelineView* mem = v.memory();
  const QCPRange full = range(mem);
  // Nothing selected: F and M do nothing.
  QVERIFY(!ops->selection() && !mem->selection());
  QTest::keyClick(mem->plot(), Qt::Key_F);
  NEAR(range(mem).size(), full.size());
  QTest::keyClick(mem->plot(), Qt::Key_M);
  QVERIFY(!mem->mark());

  // An op of the leaf track, clicked: F on the memory timeline zooms every view to it.
  const int track = ops->tree().leaf_track(Stream::Compute);
  QVERIFY(track >= 0);
  const auto& slices = ops->tree().tracks()[static_cast<std::size_t>(track)].slices;
  const int k = static_cast<int>(slices.size() / 2);
  ops->selectSlice(track, k);
  const auto sel = ops->selection();
  QVERIFY(sel);
  NEAR(sel->first, static_cast<double>(slices[static_cast<std::size_t>(k)].start - ops->timeOrigin()));
  NEAR(sel->second - sel->first, static_cast<double>(slices[static_cast<std::size_t>(k)].end -
                                                     slices[static_cast<std::size_t>(k)].start));
  const int items = mem->plot()->itemCount();
  QTest::keyClick(mem->plot(), Qt::Key_F);
  const double w = sel->second - sel->first;
  NEAR(range(mem).lower, sel->first - 0.05 * w);
  NEAR(range(mem).upper, sel->second + 0.05 * w);
  NEAR(range(ops).lower, range(mem).lower);

  // M marks it on every time view of the run; M again takes the mark away.
  QTest::keyClick(ops->plot(), Qt::Key_M);
  for (PlotView* p : std::initializer_list<PlotView*>{mem, ops, v.schedule()}) {
    QVERIFY(p->mark());
    QCOMPARE(*p->mark(), *sel);
  }
  QCOMPARE(mem->plot()->itemCount(), items + 1);
  auto* band = qobject_cast<QCPItemRect*>(mem->plot()->item(mem->plot()->itemCount() - 1));
  QVERIFY(band);
  NEAR(band->topLeft->coords().x(), sel->first);
  NEAR(band->bottomRight->coords().x(), sel->second);
  QTest::keyClick(mem->plot(), Qt::Key_M);
  for (PlotView* p : std::initializer_list<PlotView*>{mem, ops, v.schedule()}) QVERIFY(!p->mark());
  QCOMPARE(mem->plot()->itemCount(), items);

  // A selected time range takes the place of the clicked op.
  const std::int64_t t0 = ops->timeOrigin() + static_cast<std::int64_t>(full.size() / 4);
  const std::int64_t t1 = ops->timeOrigin() + static_cast<std::int64_t>(full.size() / 2);
  ops->selectTimeRange(t0, t1);
  QTest::keyClick(v.schedule()->plot(), Qt::Key_F);
  const double rw = static_cast<double>(t1 - t0);
  NEAR(range(mem).lower, static_cast<double>(t0 - ops->timeOrigin()) - 0.05 * rw);
  NEAR(range(mem).upper, static_cast<double>(t1 - ops->timeOrigin()) + 0.05 * rw);
  QTest::keyClick(mem->plot(), Qt::Key_M);
  QVERIFY(mem->mark());
  // Another run shown: no mark is left over.
  v.setTrace(testing::train("tiny", "none", 1), "tiny · none");
  QVERIFY(testing::wait_loaded(v));
  QVERIFY(!mem->mark() && !ops->mark());
  for (int i = 0; i < mem->plot()->itemCount(); ++i)
    if (auto* r = qobject_cast<QCPItemRect*>(mem->plot()->item(i)))
      QVERIFY(r->topLeft->coords().x() != static_cast<double>(t0 - ops->timeOrigin()));
}

// Switching the side panel's tabs (details, selection, statistics) moves nothing: the panel and
// the plots keep their widths.
void GuiNavigationTest::theSidePanelKeepsItsWidthAcrossTabs() {
  RunView v;
  showRun(v);
  QWidget* side = v.opPane()->sidePanel();
  QTabWidget* tabs = v.opPane()->tabs();
  const int panel = side->width(), plot = v.memory()->plot()->width();
  QVERIFY(panel > 0);
  v.ops()->selectTimeRange(v.ops()->timeOrigin(), v.ops()->timeOrigin() + 1000000);
  for (int round = 0; round < 2; ++round)
    for (int k = 0; k < tabs->count(); ++k) {
      tabs->setCurrentIndex(k);
      QTest::qWait(20);
      QCOMPARE(side->width(), panel);
      QCOMPARE(v.memory()->plot()->width(), plot);
    }
}

QTEST_MAIN(GuiNavigationTest)
#include "gui_navigation_test.moc"
