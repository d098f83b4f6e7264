// What the window says about a run before one reads the plots: the run view's header (the step the
// plots show, the median step time and its spread, computed here from the trace's steps; a
// cancelled run's progress and peak so far), the start page of an empty window, and Open recent.
#include <QAction>
#include <QApplication>
#include <QDir>
#include <QLabel>
#include <QListView>
#include <QListWidget>
#include <QMenu>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include <atomic>

#include "export.h"
#include "format.h"
#include "gui_test_util.h"
#include "main_window.h"
#include "run_controller.h"
#include "run_list.h"
#include "run_header.h"
#include "run_panel.h"
#include "start_page.h"
#include "views/memory_timeline_view.h"
#include "views/op_timeline_view.h"
#include "views/run_view.h"
#include "views/schedule_strip.h"

using namespace remat;
using namespace remat::gui;

namespace {

QString ms(double v) { return QString::number(v, 'f', v >= 100 ? 1 : 2) + " ms"; }

// tiny under none, cancelled as the step `cancel_at` (1-based, warmup included) begins.
std::shared_ptr<const Trace> cancelled_run(int warmup, int steps, int cancel_at) {
  ModelConfig m = resolve_model("tiny");
  RunSpec spec;
  spec.model = m;
  spec.schedule = testing::registry().plan(parse_policy_choice("none"), m, std::nullopt);
  spec.steps = steps;
  spec.warmup = warmup;
  CpuBackend be(2);
  SteadyClock clock;
  HostProfiler prof(clock);
  std::atomic<bool> cancel{false};
  RunCallbacks cb;
  cb.cancel = &cancel;
  const std::string at = "step " + std::to_string(cancel_at) + "/";
  cb.progress = [&](double, const std::string& what) {
    if (what.rfind(at, 0) == 0) cancel = true;
  };
  return std::make_shared<const Trace>(run_training(spec, be, &prof, clock, cb));
}

// The highest device total of the run, replayed here from its events.
std::uint64_t device_peak_of_events(const Trace& t) {
  std::int64_t live = 0, peak = 0;
  for (const auto& e : t.events)
    if (e.space == Space::Device) peak = std::max(peak, live += e.delta);
  return static_cast<std::uint64_t>(peak);
}

}  // namespace

class GuiHeadersTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    // Recent runs live in the settings: a file of this process's own, since the other GUI tests,
    // running at the same time, add theirs to the shared test settings.
    testing::isolate_settings();
    QCoreApplication::setApplicationName("rematlab-headers-test-" + QString::number(QCoreApplication::applicationPid()));
  }
  void cleanupTestCase() { QFile::remove(QSettings().fileName()); }
  void headerNamesTheShownStepAndTheSpread();
  void oneStepHasNoSpread();
  void cancelledRunSaysHowFarItGot();
  void cancelledInWarmupDrawsNoEmptyTimelines();
  void aCancelledRunsMessageIsSaidOnceAndGoesWithIt();
  void startPageUntilARunIsShown();
  void openRecentHasOneEntryPerSweep();

 private:
  QTemporaryDir tmp_;
  WindowOptions options() const { return testing::window_options(tmp_, false, false); }
};

void GuiHeadersTest::headerNamesTheShownStepAndTheSpread() {
  const auto t = testing::train("tiny", "none", 3);
  std::vector<double> v;
  for (const auto& s : t->step_stats)
    if (s.counted) v.push_back(s.time_ms);
  QCOMPARE(v.size(), std::size_t{3});
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  const StepTimes st = step_times(*t);
  QCOMPARE(st.counted, 3);
  QCOMPARE(st.median, sorted[1]);
  QCOMPARE(st.min, sorted[0]);
  QCOMPARE(st.max, sorted[2]);
  QCOMPARE(st.last, v.back());

  RunView view;
  view.setTrace(t, "tiny · none");
  QVERIFY(testing::wait_loaded(view));
  const QString h = view.headerText();
  QVERIFY2(h.contains("plots: step 3 of 3 (" + ms(v.back()) + ")"), qPrintable(h));
  QVERIFY2(h.contains("step median " + ms(sorted[1]) + " (min–max " + ms(sorted[0]) + "–" + ms(sorted[2]) +
                      " over 3 steps)"),
           qPrintable(h));
  QVERIFY2(h.contains("peak <b>" + human_bytes(static_cast<double>(t->peak_bytes)) + "</b>"), qPrintable(h));
  QVERIFY(!view.startPageShown());
}

void GuiHeadersTest::oneStepHasNoSpread() {
  const auto t = testing::train("tiny", "none", 1);
  RunView view;
  view.setTrace(t, {});
  QVERIFY(testing::wait_loaded(view));
  const QString h = view.headerText();
  QVERIFY2(h.contains("step " + ms(t->step_times_ms().at(0)) + " (1 step: no spread)"), qPrintable(h));
  QVERIFY2(h.contains("plots: step 1 of 1"), qPrintable(h));
}

void GuiHeadersTest::cancelledRunSaysHowFarItGot() {
  const auto t = cancelled_run(0, 3, 2);
  QCOMPARE(QString::fromStdString(t->status), QString("cancelled"));
  QCOMPARE(t->step_stats.size(), std::size_t{1});
  const std::uint64_t peak = device_peak_of_events(*t);
  QVERIFY(peak > 0);
  RunView view;
  view.resize(1000, 700);
  view.show();
  view.setTrace(t, {});
  QVERIFY(testing::wait_loaded(view));
  const QString h = view.headerText();
  QVERIFY2(h.contains("cancelled after 1 of 3 steps"), qPrintable(h));
  QVERIFY2(h.contains("peak so far <b>" + human_bytes(static_cast<double>(peak)) + "</b>"), qPrintable(h));
  QVERIFY2(!h.contains("peak <b>0 B"), qPrintable(h));
  QVERIFY2(h.contains("plots: every event of the run"), qPrintable(h));
  // The peak the header names is the one the plot marks.
  QCOMPARE(view.memory()->plottedMaximum(), static_cast<double>(peak));
  // The note in place of the op timeline agrees with the header: a step did finish.
  const QString note = view.noOpsText();
  QVERIFY2(note.contains("after 1 of 3 steps"), qPrintable(note));
  QVERIFY2(!note.contains("No step finished") && !note.contains("No counted step finished"), qPrintable(note));
}

void GuiHeadersTest::aCancelledRunsMessageIsSaidOnceAndGoesWithIt() {
  const auto t = cancelled_run(0, 3, 3);  // two counted steps done, the third not
  QCOMPARE(t->step_times_ms().size(), std::size_t{2});
  MainWindow w(options());
  w.resize(1280, 800);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  emit w.controller()->finished(t, QString(), QString());
  QVERIFY(testing::wait_loaded(*w.runView()));
  QVERIFY2(w.runView()->headerText().contains("cancelled after 2 of 3 steps"), qPrintable(w.runView()->headerText()));
  // Said once ("run cancelled: run cancelled" before), with how far it got.
  const QString msg = w.runPanel()->errorText();
  QVERIFY2(msg.contains("cancelled after 2 of 3 steps"), qPrintable(msg));
  QVERIFY2(msg.count("cancelled") == 1, qPrintable(msg));
  // About that run: gone when another is shown, not again when it is shown again.
  const int other = w.runs()->add(testing::train("tiny", "none", 1), {});
  w.showRun(other);
  QVERIFY2(w.runPanel()->errorText().isEmpty(), qPrintable(w.runPanel()->errorText()));
}

void GuiHeadersTest::cancelledInWarmupDrawsNoEmptyTimelines() {
  const auto t = cancelled_run(1, 3, 1);
  QCOMPARE(QString::fromStdString(t->status), QString("cancelled"));
  QVERIFY(t->ops.empty());
  RunView view;
  view.resize(1000, 700);
  view.show();
  view.setTrace(t, {});
  QVERIFY(testing::wait_loaded(view));
  const QString h = view.headerText();
  QVERIFY2(h.contains("cancelled after 0 of 3 steps (warmup: 0 of 1 done)"), qPrintable(h));
  // No schedule strip or op timeline without ops: no empty axes with crowded ticks.
  QVERIFY(view.memory()->isVisible());
  QVERIFY(!view.schedule()->isVisible());
  QVERIFY(!view.ops()->isVisible());
  // A complete run shows them again.
  view.setTrace(testing::train("tiny", "none", 1), {});
  QVERIFY(testing::wait_loaded(view));
  QVERIFY(view.schedule()->isVisible());
  QVERIFY(view.ops()->isVisible());
}

void GuiHeadersTest::startPageUntilARunIsShown() {
  MainWindow w(options());
  w.resize(1280, 800);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  StartPage* sp = w.startPage();
  QVERIFY(sp);
  QVERIFY(w.runView()->startPageShown());
  QVERIFY(sp->isVisible());
  QVERIFY(!w.runView()->memory()->isVisible());
  // Every preset is listed; a click selects it in the Setup panel.
  QVERIFY(sp->presets()->count() >= 6);
  QListWidgetItem* small = nullptr;
  for (int i = 0; i < sp->presets()->count(); ++i)
    if (sp->presets()->item(i)->text().startsWith("small ")) small = sp->presets()->item(i);
  QVERIFY(small);
  QVERIFY(w.runPanel()->modelName() != "small");
  QTest::mouseClick(sp->presets()->viewport(), Qt::LeftButton, {}, sp->presets()->visualItemRect(small).center());
  QCOMPARE(w.runPanel()->modelName(), QString("small"));
  // A run shown: the plots; no run left: the start page again.
  const int row = w.runs()->add(testing::train("tiny", "none", 1), {});
  w.showRun(row);
  QVERIFY(testing::wait_loaded(*w.runView()));
  QVERIFY(!w.runView()->startPageShown());
  QVERIFY(!sp->isVisible());
  QVERIFY(w.runView()->memory()->isVisible());
  w.runs()->remove(row);
  w.showRun(-1);
  QVERIFY(w.runView()->startPageShown());
  QVERIFY(sp->isVisible());
}

void GuiHeadersTest::openRecentHasOneEntryPerSweep() {
  QSettings().remove("recentRuns");
  MainWindow w(options());
  QVERIFY(w.recentRuns().isEmpty());
  // A sweep directory of three runs.
  const QString sweep = tmp_.filePath("a-rather-long-directory-name-for-sweeps/sweep-of-three");
  QVERIFY(QDir().mkpath(sweep));
  const auto t = testing::train("tiny", "none", 1);
  for (const char* name : {"01-none", "02-none", "03-none"}) save_run_dir(*t, sweep + "/" + name, false);
  QSignalSpy done(&w, &MainWindow::readsDone);
  w.openRunDir(sweep);
  QVERIFY(done.wait(60000));
  QCOMPARE(w.runs()->rowCount(), 3);
  QCOMPARE(w.recentRuns(), QStringList{QFileInfo(sweep).absoluteFilePath()});
  // The menu shows the path, shortened, with the full path in the tooltip.
  QList<QAction*> entries;
  for (QAction* a : w.recentMenu()->actions())
    if (a->data().toString() == QFileInfo(sweep).absoluteFilePath()) entries << a;
  QCOMPARE(entries.size(), 1);
  QVERIFY2(entries[0]->text().contains(short_path(QFileInfo(sweep).absoluteFilePath()).replace("&", "&&")),
           qPrintable(entries[0]->text()));
  QVERIFY2(entries[0]->text().contains("sweep-of-three"), qPrintable(entries[0]->text()));
  QCOMPARE(entries[0]->toolTip(), QFileInfo(sweep).absoluteFilePath());
  // ... and the start page lists the same entry.
  QCOMPARE(w.startPage()->recent()->count(), 1);
  QCOMPARE(w.startPage()->recent()->item(0)->toolTip(), QFileInfo(sweep).absoluteFilePath());
  // A long path keeps its start and its last two parts.
  const QString deep = "/data/experiments/rematlab/2026/december/sweeps/sweep-0412/03-uniform";
  QCOMPARE(short_path(deep, 40), QString("/data/…/sweep-0412/03-uniform"));
  QCOMPARE(short_path("/tmp/x"), QString("/tmp/x"));
}

QTEST_MAIN(GuiHeadersTest)
#include "gui_headers_test.moc"
