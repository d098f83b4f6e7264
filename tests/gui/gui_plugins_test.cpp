// The desktop app with hostile policy plugins on its plugin path (tests/plugins): it starts,
// lists the usable policies and names the skipped files in the status bar; a plan that crashes
// or hangs is an error in the prediction line, and the app goes on planning with the others.
#include <QPushButton>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QtTest>

#include "gui_test_util.h"
#include "main_window.h"
#include "run_panel.h"

using namespace remat;
using namespace remat::gui;

class GuiPluginsTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    testing::isolate_settings();
    qputenv("REMAT_PLUGIN_PATH", QByteArray(REMAT_BUILD_DIR) + "/test-plugins");
    qputenv("REMAT_PLAN_TIMEOUT_S", "1");
  }
  void brokenPluginsAreSkippedAtStart();
  void aPlanThatCrashesOrHangsIsAnErrorNotACrash();

 private:
  QTemporaryDir tmp_;
  WindowOptions options() const { return testing::window_options(tmp_, false); }
  // The prediction of `policy` on tiny once it is done.
  static PredictionOutcome predict(RunPanel* p, const QString& policy) {
    PredictionOutcome none;
    none.error = "not offered or still pending: " + policy;
    if (!p->selectPolicy(policy) || !QTest::qWaitFor([p] { return !p->predictionPending(); }, 30000)) return none;
    return p->lastPrediction();
  }
};

void GuiPluginsTest::brokenPluginsAreSkippedAtStart() {
  MainWindow w(options());  // a description that throws or a crashing loader used to end the app here
  w.show();
  const QString skipped = w.statusBar()->toolTip();
  for (const char* f : {"description_throws.so", "static_init_crash.so", "bad_name.so", "bad_param_name.so"})
    QVERIFY2(skipped.contains(f), qPrintable(QString(f) + " not named in: " + skipped));
  QVERIFY(skipped.contains("no words for it"));
  QVERIFY(skipped.contains("SIGSEGV"));
  RunPanel* p = w.runPanel();
  QVERIFY(!p->selectPolicy("description_throws"));
  QVERIFY(!p->selectPolicy("static_init_crash"));
  for (const char* name : {"none", "uniform", "plan_crash"}) QVERIFY2(p->selectPolicy(name), name);
}

void GuiPluginsTest::aPlanThatCrashesOrHangsIsAnErrorNotACrash() {
  MainWindow w(options());
  w.show();
  RunPanel* p = w.runPanel();
  QVERIFY(p->selectModel("tiny"));
  PredictionOutcome o = predict(p, "plan_crash");
  QVERIFY(!o.ok);
  QVERIFY2(o.error.contains("plan_crash.so") && o.error.contains("SIGSEGV"), qPrintable(o.error));
  o = predict(p, "plan_hangs");
  QVERIFY(!o.ok);
  QVERIFY2(o.error.contains("plan_hangs.so") && o.error.contains("did not finish within 1 s"), qPrintable(o.error));
  QVERIFY(!p->runButton()->isEnabled());
  o = predict(p, "none");
  QVERIFY2(o.ok, qPrintable(o.error));
  QVERIFY(p->runButton()->isEnabled());
}

QTEST_MAIN(GuiPluginsTest)
#include "gui_plugins_test.moc"
