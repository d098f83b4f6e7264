// Loading a run into the run view, whose data is built on a worker thread: the page says it is
// loading until the views show the run; another run, no run, a closed run or a destroyed view
// while a load is in flight neither crashes nor keeps the trace alive, and only the last run
// asked for is shown; an error of core on the worker is shown in the page, in loadFailed and in
// the window's status bar.
#include <QAction>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QListView>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QThreadPool>
#include <QtTest>
#include <limits>

#include "export.h"
#include "core/trace/profiler_trace.h"
#include "gui_test_util.h"
#include "main_window.h"
#include "run_list.h"
#include "views/alloc_bands_plottable.h"
#include "views/memory_timeline_view.h"
#include "views/op_stats_table.h"
#include "views/op_timeline_pane.h"
#include "views/op_timeline_view.h"
#include "views/run_view.h"
#include "views/schedule_strip.h"

using namespace remat;
using namespace remat::gui;

namespace {

// Every worker done and every object it left for deletion deleted.
void settle() {
  QThreadPool::globalInstance()->waitForDone();
  for (int i = 0; i < 3; ++i) {
    QCoreApplication::processEvents();
    QCoreApplication::sendPostedEvents(nullptr, QEvent::DeferredDelete);
  }
}

// A trace whose live bytes overflow: core's timeline refuses it.
std::shared_ptr<const Trace> overflowing(const Trace& base) {
  auto t = std::make_shared<Trace>(base);
  MemoryEvent e = t->events.front();
  e.delta = std::numeric_limits<std::int64_t>::max();
  t->events.insert(t->events.begin() + static_cast<std::ptrdiff_t>(t->step_first_event), 2, e);
  t->step_end_event += 2;
  return t;
}

}  // namespace

class GuiRunLoadTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    testing::isolate_settings();
    QVERIFY(tmp_.isValid());
    a_ = testing::train("tiny", "none", 1);
    b_ = testing::train("tiny", "uniform:segments=2", 1);
  }
  void loadingStateThenTheViews();
  void anotherRunWhileLoadingShowsOnlyTheLast();
  void noRunWhileLoadingKeepsNothing();
  void destroyedWhileLoadingKeepsNothing();
  void closingARunWhileItLoads();
  void anErrorOnTheWorkerIsShown();
  void aSweepAndRanksJoinInTheirOrder();
  void anImportedTraceShowsNoEmptyScheduleStrip();

 private:
  WindowOptions options() { return testing::window_options(tmp_, false, false); }
  QTemporaryDir tmp_;
  std::shared_ptr<const Trace> a_, b_;
};

void GuiRunLoadTest::loadingStateThenTheViews() {
  RunView view;
  view.resize(1200, 800);
  view.show();
  QSignalSpy loaded(&view, &RunView::loaded);
  view.setTrace(a_, "tiny · none");
  // Nothing built yet on this thread: the page says so, the views are not shown.
  QVERIFY(view.loading());
  QVERIFY(view.loadingPageShown());
  QVERIFY2(view.loadingText().contains("Loading tiny · none"), qPrintable(view.loadingText()));
  QVERIFY(!view.memory()->isVisible());
  QVERIFY(view.memory()->trace() == nullptr);
  QVERIFY(testing::wait_loaded(view));
  QCOMPARE(loaded.count(), 1);
  QVERIFY(!view.loadingPageShown());
  QVERIFY(view.memory()->isVisible());
  // Each view shows the run, with the data the worker built.
  QCOMPARE(view.memory()->trace().get(), a_.get());
  QCOMPARE(view.ops()->trace(), a_.get());
  QVERIFY(!view.ops()->tree().tracks().empty());
  QCOMPARE(view.memory()->plottedMaximum(), static_cast<double>(a_->peak_bytes));
  QVERIFY(!view.opPane()->statsTable()->stats().empty());
  // The statistics the worker computed are core's.
  const auto direct = op_stats(*a_, OpStatKey::OpType);
  QCOMPARE(view.opPane()->statsTable()->stats().size(), direct.size());
  for (std::size_t i = 0; i < direct.size(); ++i) {
    QCOMPARE(view.opPane()->statsTable()->stats()[i].key, direct[i].key);
    QCOMPARE(view.opPane()->statsTable()->stats()[i].count, direct[i].count);
  }
  QVERIFY(!view.headerText().isEmpty());
  // The allocations' bands came with the load: the mode switch lays nothing out on this thread
  // when the first layout fits, and the bands' top is the stacked live bytes.
  view.memory()->setMemoryMode(MemoryMode::Allocations);
  QVERIFY(view.memory()->allocations()->bands());
  QCOMPARE(view.memory()->allocations()->bands()->bands().size(), AllocBands(*a_).bands().size());
}

void GuiRunLoadTest::anotherRunWhileLoadingShowsOnlyTheLast() {
  RunView view;
  view.resize(1200, 800);
  view.show();
  QSignalSpy loaded(&view, &RunView::loaded);
  view.setTrace(a_, "a");
  view.setTrace(b_, "b");
  QCOMPARE(view.trace().get(), b_.get());
  QVERIFY(testing::wait_loaded(view));
  settle();  // the first load's result, if it came, was dropped
  QCOMPARE(loaded.count(), 1);
  QCOMPARE(view.memory()->trace().get(), b_.get());
  QCOMPARE(view.ops()->trace(), b_.get());
  QVERIFY(view.loadingText().contains("Loading b"));
}

void GuiRunLoadTest::noRunWhileLoadingKeepsNothing() {
  auto t = std::make_shared<const Trace>(*a_);
  std::weak_ptr<const Trace> weak = t;
  RunView view;
  view.show();
  QSignalSpy loaded(&view, &RunView::loaded), failed(&view, &RunView::loadFailed);
  view.setTrace(std::move(t), "gone");
  QVERIFY(view.loading());
  view.setTrace(nullptr, {});
  QVERIFY(!view.loading());
  QVERIFY(!view.loadingPageShown());
  settle();
  QCOMPARE(loaded.count(), 0);
  QCOMPARE(failed.count(), 0);
  QVERIFY(view.memory()->trace() == nullptr);
  QVERIFY(weak.expired());  // neither the view, the worker nor the dropped result holds it
}

void GuiRunLoadTest::destroyedWhileLoadingKeepsNothing() {
  auto t = std::make_shared<const Trace>(*a_);
  std::weak_ptr<const Trace> weak = t;
  {
    auto* view = new RunView;
    view->show();
    view->setTrace(std::move(t), "gone");
    QVERIFY(view->loading());
    delete view;
  }
  settle();
  QVERIFY(weak.expired());
}

void GuiRunLoadTest::closingARunWhileItLoads() {
  MainWindow w(options());
  w.show();
  auto t = std::make_shared<const Trace>(*a_);
  std::weak_ptr<const Trace> weak = t;
  const int first = w.runs()->add(b_, {});
  const int row = w.runs()->add(std::move(t), {});
  w.showRun(row);
  QVERIFY(w.runView()->loading());
  // Removing it from the list shows the one before, which loads in its place.
  w.runListView()->setCurrentIndex(w.runs()->index(row));
  QAction* remove = nullptr;
  for (QAction* a : w.findChildren<QAction*>())
    if (a->text().remove('&').startsWith("Remove run from the list")) remove = a;
  QVERIFY(remove);
  remove->trigger();
  QCOMPARE(w.runs()->rowCount(), 1);
  QVERIFY(testing::wait_loaded(*w.runView()));
  settle();
  QCOMPARE(w.runView()->memory()->trace().get(), w.runs()->at(first).trace.get());
  QVERIFY(weak.expired());
}

void GuiRunLoadTest::anErrorOnTheWorkerIsShown() {
  const auto bad = overflowing(*a_);
  {
    RunView view;
    view.show();
    QSignalSpy failed(&view, &RunView::loadFailed), loaded(&view, &RunView::loaded);
    view.setTrace(bad, "bad");
    QVERIFY(!testing::wait_loaded(view));
    QCOMPARE(loaded.count(), 0);
    QCOMPARE(failed.count(), 1);
    const QString error = failed.at(0).at(0).toString();
    QVERIFY2(error.contains("overflow"), qPrintable(error));
    QVERIFY(view.loadingPageShown());
    QVERIFY2(view.loadingText().contains("Cannot show bad") && view.loadingText().contains(error),
             qPrintable(view.loadingText()));
    // A good run after it is shown as usual.
    view.setTrace(a_, "good");
    QVERIFY(testing::wait_loaded(view));
    QCOMPARE(view.memory()->trace().get(), a_.get());
  }
  MainWindow w(options());
  w.show();
  const int row = w.runs()->add(bad, {});
  w.showRun(row);
  QVERIFY(!testing::wait_loaded(*w.runView()));
  QVERIFY2(w.statusBar()->currentMessage().contains("overflow"), qPrintable(w.statusBar()->currentMessage()));
}

// The runs of a sweep directory join the list in sweep.json's order (neither by name nor as
// their reads finish: the first is the largest), the ranks of a run of several in ranks.json's.
void GuiRunLoadTest::aSweepAndRanksJoinInTheirOrder() {
  const QString sweep = tmp_.filePath("sweep-order");
  QVERIFY(QDir().mkpath(sweep));
  const auto big = testing::train("tiny", "none", 3);
  const QStringList order = {"zz-big", "aa", "mm", "bb"};
  save_run_dir(*big, sweep + "/zz-big", false);
  for (const QString& name : order.mid(1)) save_run_dir(*a_, sweep + "/" + name, false);
  QFile f(testing::gui_test_data() + "/../../data/sweep-v1/sweep.json");
  QVERIFY(f.open(QIODevice::ReadOnly));
  QJsonObject j = QJsonDocument::fromJson(f.readAll()).object();
  const QJsonObject row = j["runs"].toArray().first().toObject();
  QJsonArray runs;
  for (const QString& name : order) {
    QJsonObject r = row;
    r["run"] = name;
    r["dir"] = name;
    runs.append(r);
  }
  j["runs"] = runs;
  QFile out(sweep + "/sweep.json");
  QVERIFY(out.open(QIODevice::WriteOnly));
  out.write(QJsonDocument(j).toJson());
  out.close();

  for (int attempt = 0; attempt < 2; ++attempt) {
    MainWindow w(options());
    QSignalSpy done(&w, &MainWindow::readsDone);
    w.openRunDir(sweep);
    QVERIFY(done.wait(60000));
    QCOMPARE(w.runs()->rowCount(), 4);
    for (int k = 0; k < 4; ++k)
      QCOMPARE(QFileInfo(w.runs()->at(k).dir).fileName(), order[k]);
    QCOMPARE(w.runs()->at(0).trace->steps, big->steps);

    MainWindow r(options());
    QSignalSpy rdone(&r, &MainWindow::readsDone);
    r.openRunDir(testing::gui_test_data() + "/../../data/ranks-v3");
    QVERIFY(rdone.wait(60000));
    QCOMPARE(r.runs()->rowCount(), 2);
    QCOMPARE(QFileInfo(r.runs()->at(0).dir).fileName(), QString("rank-0"));
    QCOMPARE(QFileInfo(r.runs()->at(1).dir).fileName(), QString("rank-1"));
  }
  settle();
}

// A torch.profiler trace has ops but no schedule: the strip is not drawn (it drew empty rows
// on an axis of its own); a run of this engine has it.
void GuiRunLoadTest::anImportedTraceShowsNoEmptyScheduleStrip() {
  auto imported = std::make_shared<const Trace>(
      import_profiler_trace(QString::fromUtf8(REMAT_SOURCE_DIR).toStdString() + "/tests/data/torch/profiler-trace.json"));
  QVERIFY(imported->schedule_records.empty() && !imported->ops.empty());
  RunView v;
  v.resize(1280, 800);
  v.show();
  v.setTrace(imported, "imported");
  QVERIFY(testing::wait_loaded(v));
  QVERIFY(!v.schedule()->isVisibleTo(&v));
  QVERIFY(v.ops()->isVisibleTo(&v));
  v.setTrace(a_, "tiny");
  QVERIFY(testing::wait_loaded(v));
  QVERIFY(v.schedule()->isVisibleTo(&v));
}

QTEST_MAIN(GuiRunLoadTest)
#include "gui_run_load_test.moc"
