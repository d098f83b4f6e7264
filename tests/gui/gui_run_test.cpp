// The desktop app driven as a user drives it, offscreen: every policy on tiny through the real
// window and worker thread, Cancel on a run that would otherwise last minutes, and the model
// editor refusing what the batch mode refuses.
#include <QComboBox>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QListView>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QtTest>
#include <qcustomplot.h>

#include "core/backend/backend_factory.h"
#include "core/engine/simulator.h"
#include "core/trace/run_dir.h"
#include "gui_test_util.h"
#include "main_window.h"
#include "model_editor.h"
#include "param_editor.h"
#include "run_header.h"
#include "run_controller.h"
#include "run_panel.h"
#include "views/memory_timeline_view.h"
#include "views/run_view.h"

using namespace remat;
using namespace remat::gui;

class GuiRunTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { testing::isolate_settings(); }
  void everyPolicyOnTinyPlotsItsPeak();
  void cancelStopsALongRunBetweenOps();
  void openingATorchSnapshotOrTraceImportsIt();
  void invalidCustomConfigShowsTheErrorAndDisablesRun();
  void huggingFaceConfigFillsTheEditor();
  void parameterEditorsFollowTheDeclarations();
  void cudaIsOfferedOnlyWhereItWorks();
  void budgetPlansWithStepTimesOfARun();
  void headerSaysHowUnevenTheRoutingWas();

 private:
  QTemporaryDir tmp_;
  // Shows w with its panel on one counted step of tiny, without warmup.
  static bool showOneStepOfTiny(MainWindow& w) {
    w.show();
    w.runPanel()->setSteps(1);
    w.runPanel()->setWarmup(0);
    return w.runPanel()->selectModel("tiny");
  }
  // Six tenths of what none keeps on tiny: a feasible budget that forces recomputation.
  static QString tinyBudget() {
    const ModelConfig m = resolve_model("tiny");
    const auto none = simulate(m, store_all_schedule(m.layers), nullptr);
    return QString::number(none.activation_peak_bytes * 6 / 10);
  }
  WindowOptions options() const { return testing::window_options(tmp_); }
};

void GuiRunTest::everyPolicyOnTinyPlotsItsPeak() {
  MainWindow w(options());
  QVERIFY(showOneStepOfTiny(w));
  RunPanel* p = w.runPanel();
  const auto names = w.registry().names();
  QVERIFY2(names.size() >= 6, "the six shipped policies are loaded");
  int expected_rows = 0;
  for (const auto& name : names) {
    const QString policy = QString::fromStdString(name);
    QVERIFY(p->selectPolicy(policy));
    if (name == "budget") {
      p->setMemoryBudget(tinyBudget());
    } else {
      p->setMemoryBudget({});
    }
    QTRY_VERIFY_WITH_TIMEOUT(!p->predictionPending(), 30000);
    QVERIFY2(p->lastPrediction().ok, qPrintable(policy + ": " + p->lastPrediction().error));
    QVERIFY2(p->runButton()->isEnabled(), qPrintable(policy));
    QSignalSpy finished(&w, &MainWindow::runFinished);
    QTest::mouseClick(p->runButton(), Qt::LeftButton);
    QVERIFY(w.controller()->running());
    QVERIFY(!p->runButton()->isEnabled());
    QVERIFY(p->cancelButton()->isEnabled());
    QVERIFY2(finished.wait(120000), qPrintable(policy + " did not finish"));
    ++expected_rows;
    QCOMPARE(w.runs()->rowCount(), expected_rows);
    const RunEntry& e = w.runs()->at(expected_rows - 1);
    QVERIFY2(e.trace->complete, qPrintable(policy + ": " + QString::fromStdString(e.trace->error)));
    QCOMPARE(QString::fromStdString(e.trace->policy), policy);
    QCOMPARE(w.currentRun(), expected_rows - 1);
    // The memory timeline shows this run, and its highest drawn point is the measured peak.
    QVERIFY(testing::wait_loaded(*w.runView()));
    MemoryTimelineView* mem = w.runView()->memory();
    QCOMPARE(mem->trace().get(), e.trace.get());
    QCOMPARE(mem->plottedMaximum(), static_cast<double>(e.trace->peak_bytes));
    // ... also zoomed in around the peak and far from it.
    const QCPRange full = mem->dataTimeRange();
    mem->plot()->xAxis->setRange(full.lower, full.lower + full.size() * 0.05);
    QVERIFY(mem->plottedMaximum() <= static_cast<double>(e.trace->peak_bytes));
    mem->resetZoom();
    QCOMPARE(mem->plottedMaximum(), static_cast<double>(e.trace->peak_bytes));
    // Saved as a run directory that reads back to the same figures.
    QVERIFY(!e.dir.isEmpty());
    const Trace back = read_run_dir(e.dir.toStdString());
    QCOMPARE(back.peak_bytes, e.trace->peak_bytes);
    QCOMPARE(back.ops.size(), e.trace->ops.size());
    QVERIFY(p->runButton()->isEnabled());
  }
  // The same run directory opened from disk joins the list once.
  const QString first = w.runs()->at(0).dir;
  w.openRunDir(first);  // already in the list: selected, not added again
  QCOMPARE(w.runs()->rowCount(), expected_rows);
  QCOMPARE(w.currentRun(), 0);
  // A new window opens them from disk: the directory holding them opens every run in it.
  WindowOptions o = options();
  o.error_dialogs = false;
  MainWindow w2(o);
  QSignalSpy done(&w2, &MainWindow::readsDone);
  w2.openRunDir(tmp_.filePath("runs"));
  QVERIFY(done.wait(60000));
  QCOMPARE(w2.runs()->rowCount(), expected_rows);
  for (int r = 0; r < expected_rows; ++r) {
    QVERIFY(w2.runs()->at(r).trace->complete);
    QVERIFY(!w2.runs()->at(r).dir.isEmpty());
  }
  // A directory that is not a run: refused with the reason, nothing added.
  QSignalSpy failed(&w2, &MainWindow::openFailed);
  w2.openRunDir(tmp_.filePath("no-such-run"));
  QVERIFY(failed.wait(10000));
  QVERIFY(failed.front().at(1).toString().contains("does not exist"));
  QCOMPARE(w2.runs()->rowCount(), expected_rows);
  // A run directory whose model has 10^9 layers (the app once ran out of memory on it): refused
  // when read, naming the field, nothing added.
  const QString huge = tmp_.filePath("huge-layers");
  QVERIFY(QDir().mkpath(huge));
  for (const QString& f : QDir(first).entryList(QDir::Files)) QVERIFY(QFile::copy(first + "/" + f, huge + "/" + f));
  QFile summary(huge + "/summary.json");
  QVERIFY(summary.open(QIODevice::ReadOnly));
  QJsonObject s = QJsonDocument::fromJson(summary.readAll()).object();
  summary.close();
  QJsonObject model = s["model"].toObject();
  model["layers"] = 1000000000;
  s["model"] = model;
  QVERIFY(summary.open(QIODevice::WriteOnly | QIODevice::Truncate));
  summary.write(QJsonDocument(s).toJson());
  summary.close();
  failed.clear();
  w2.openRunDir(huge);
  QVERIFY(failed.wait(10000));
  QVERIFY2(failed.front().at(1).toString().contains("layers"), qPrintable(failed.front().at(1).toString()));
  QCOMPARE(w2.runs()->rowCount(), expected_rows);
  // What an interrupted write left next to the runs is named in the status bar (no process has
  // the pid).
  const QString leftover = tmp_.filePath("runs/.lost.tmp-999999999-1");
  QVERIFY(QDir().mkpath(leftover));
  MainWindow w3(o);
  QSignalSpy done3(&w3, &MainWindow::readsDone);
  w3.openRunDir(tmp_.filePath("runs"));
  QVERIFY(done3.wait(60000));
  QVERIFY2(w3.statusBar()->currentMessage().contains(".lost.tmp-999999999-1"),
           qPrintable(w3.statusBar()->currentMessage()));
  QVERIFY(QDir(leftover).removeRecursively());
}

// A torch memory snapshot and a profiler trace open like runs (tests/data/torch); a pickle
// that would run code is refused in the error path, nothing added.
void GuiRunTest::openingATorchSnapshotOrTraceImportsIt() {
  WindowOptions o = options();
  o.error_dialogs = false;
  MainWindow w(o);
  const QString data = remat::gui::testing::gui_test_data() + "/../../data/torch/";
  QSignalSpy opened(&w, &MainWindow::runOpened);
  w.openRunDir(data + "snapshot-torch2.pickle");
  QVERIFY(opened.wait(30000));
  w.openRunDir(data + "profiler-trace.json");
  QVERIFY(opened.wait(30000));
  QCOMPARE(w.runs()->rowCount(), 2);
  const Trace& snap = *w.runs()->at(0).trace;
  QCOMPARE(QString::fromStdString(snap.source), QStringLiteral("pytorch-snapshot"));
  QCOMPARE(snap.peak_bytes, std::uint64_t{644096});  // snapshot-torch2.expected.json
  // An imported trace has no prediction: its header says where it came from, not "predicted 0 B".
  const QString header = run_header(snap);
  QVERIFY2(header.contains("not predicted: from pytorch-snapshot"), qPrintable(header));
  QVERIFY2(!header.contains("predicted 0 B"), qPrintable(header));
  QCOMPARE(QString::fromStdString(w.runs()->at(1).trace->source), QStringLiteral("pytorch-profiler"));
  QCOMPARE(w.runs()->at(1).trace->ops.size(), std::size_t{11});
  QSignalSpy failed(&w, &MainWindow::openFailed);
  w.openRunDir(data + "runs-code-global.pickle");
  QVERIFY(failed.wait(10000));
  QVERIFY2(failed.front().at(1).toString().contains("opcode GLOBAL"), qPrintable(failed.front().at(1).toString()));
  QCOMPARE(w.runs()->rowCount(), 2);
}

void GuiRunTest::cancelStopsALongRunBetweenOps() {
  MainWindow w(options());
  w.show();
  RunPanel* p = w.runPanel();
  QVERIFY(p->selectModel("small"));
  QVERIFY(p->selectPolicy("uniform"));
  p->setSteps(100000);  // hours of work if nothing stops it
  p->setWarmup(0);
  QTRY_VERIFY_WITH_TIMEOUT(!p->predictionPending(), 30000);
  QSignalSpy progress(w.controller(), &RunController::progress);
  QSignalSpy finished(&w, &MainWindow::runFinished);
  QVERIFY(w.startRun());
  // Wait until ops are running, then check the window still answers while the worker works.
  QTRY_VERIFY_WITH_TIMEOUT(progress.count() >= 2, 60000);
  QElapsedTimer responsive;
  responsive.start();
  QApplication::processEvents();
  QVERIFY(responsive.elapsed() < 1000);
  QVERIFY(w.controller()->running());
  QElapsedTimer t;
  t.start();
  QTest::mouseClick(p->cancelButton(), Qt::LeftButton);
  QVERIFY2(finished.wait(20000), "the run did not stop after Cancel");
  const qint64 stop_ms = t.elapsed();
  qInfo("stopped %lld ms after Cancel", static_cast<long long>(stop_ms));
  QVERIFY(stop_ms < 10000);
  QCOMPARE(w.runs()->rowCount(), 1);
  const RunEntry& e = w.runs()->at(0);
  QCOMPARE(QString::fromStdString(e.trace->status), QString("cancelled"));
  QVERIFY(!e.trace->complete);
  QVERIFY(e.trace->step_stats.size() < 100000u);
  QVERIFY(w.runs()->data(w.runs()->index(0), Qt::DisplayRole).toString().contains("cancelled"));
  QVERIFY(p->errorText().contains("cancelled"));
  QVERIFY(!w.controller()->running());
  QVERIFY(p->runButton()->isEnabled());
  QVERIFY(!p->cancelButton()->isEnabled());
}

void GuiRunTest::invalidCustomConfigShowsTheErrorAndDisablesRun() {
  MainWindow w(options());
  w.show();
  RunPanel* p = w.runPanel();
  QVERIFY(p->selectModel("tiny"));
  QCOMPARE(p->policyName(), QString("none"));  // the default
  QTRY_VERIFY_WITH_TIMEOUT(!p->predictionPending(), 30000);
  QVERIFY(p->runButton()->isEnabled());
  ModelEditor* ed = p->modelEditor();
  // 128 is not divisible by 5 heads: the error is under the field the batch mode names.
  ed->intField("heads")->setValue(5);
  QCOMPARE(p->modelBox()->currentData().toString(), QString("custom"));
  QVERIFY(!ed->isValid());
  QCOMPARE(ed->errorField(), QString("hidden"));
  QLabel* err = ed->errorLabel("hidden");
  QVERIFY(err->isVisible());
  QVERIFY2(err->text().contains("not divisible by heads"), qPrintable(err->text()));
  QVERIFY(!p->runButton()->isEnabled());
  QVERIFY(!w.startRun());
  QVERIFY(!w.controller()->running());
  // Zero blocks: the error moves to that field.
  ed->intField("heads")->setValue(4);
  ed->intField("layers")->setValue(0);
  QCOMPARE(ed->errorField(), QString("layers"));
  QVERIFY(ed->errorLabel("layers")->isVisible());
  QVERIFY(!ed->errorLabel("hidden")->isVisible());
  QVERIFY(!p->runButton()->isEnabled());
  // A sequence longer than the position table (gpt2).
  ed->intField("layers")->setValue(2);
  ed->intField("seq")->setValue(128);
  QCOMPARE(ed->errorField(), QString("seq"));
  QVERIFY(!p->runButton()->isEnabled());
  // Fixed: valid again and runnable.
  ed->intField("positions")->setValue(128);
  QVERIFY(ed->isValid());
  QVERIFY(!ed->errorLabel("seq")->isVisible());
  QVERIFY(p->runButton()->isEnabled());
  QTRY_VERIFY_WITH_TIMEOUT(!p->predictionPending(), 30000);
  QVERIFY(p->lastPrediction().ok);
  QVERIFY(p->predictionLabel()->text().contains("Predicted peak"));
  // A policy that cannot plan (budget without a budget) shows why and disables Run too.
  QVERIFY(p->selectPolicy("budget"));
  p->setMemoryBudget({});
  QTRY_VERIFY_WITH_TIMEOUT(!p->predictionPending(), 30000);
  QVERIFY(!p->lastPrediction().ok);
  QVERIFY(p->predictionLabel()->text().contains("memory-budget"));
  QVERIFY(!p->runButton()->isEnabled());
  p->setMemoryBudget("not a size");
  QVERIFY(!p->runButton()->isEnabled());
}

void GuiRunTest::huggingFaceConfigFillsTheEditor() {
  MainWindow w(options());
  RunPanel* p = w.runPanel();
  const QString path = tmp_.filePath("config.json");
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(R"({"model_type": "llama", "hidden_size": 128, "intermediate_size": 352, "num_hidden_layers": 3,
              "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 256,
              "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0})");
  f.close();
  QString err;
  QVERIFY2(p->loadModelFile(path, &err), qPrintable(err));
  const ModelConfig m = p->modelEditor()->config();
  QCOMPARE(m.family, Family::Llama);
  QCOMPARE(m.layers, 3);
  QCOMPARE(m.kv_heads, 2);
  QCOMPARE(m.ffn, 352);
  QVERIFY(p->modelEditor()->isValid());
  // A file that is not a model shows the reason and keeps the last valid model.
  const QString bad = tmp_.filePath("bad.json");
  QFile b(bad);
  QVERIFY(b.open(QIODevice::WriteOnly));
  b.write("{\"model_type\": \"bert\"}");
  b.close();
  QVERIFY(!p->loadModelFile(bad, &err));
  QVERIFY(!err.isEmpty());
  QCOMPARE(p->modelEditor()->config().layers, 3);
}

void GuiRunTest::parameterEditorsFollowTheDeclarations() {
  MainWindow w(options());
  RunPanel* p = w.runPanel();
  QVERIFY(p->selectModel("tiny"));
  for (const auto& lp : w.registry().policies()) {
    QVERIFY(p->selectPolicy(QString::fromStdString(lp.name)));
    const auto decls = lp.params;
    QCOMPARE(p->paramEditor()->count(), static_cast<int>(decls.size()));
    for (const auto& d : decls) {
      QWidget* ed = p->paramEditor()->editor(QString::fromStdString(d.name));
      QVERIFY2(ed, d.name.c_str());
      if (auto* sb = qobject_cast<QSpinBox*>(ed); sb && d.min < d.max) {
        QVERIFY(sb->maximum() <= d.max);
        QVERIFY(sb->minimum() >= d.min - 1);  // one below: "default" for optional ones
        QVERIFY(!p->setPolicyParam(QString::fromStdString(d.name), QString::number(d.min - 5)));
      }
    }
    QVERIFY(p->paramEditor()->values().empty());  // defaults are not passed on
  }
  QVERIFY(p->selectPolicy("uniform"));
  QVERIFY(p->setPolicyParam("segments", "2"));
  QCOMPARE(p->request()->policy.params.at("segments"), std::string("2"));
  QVERIFY(p->selectPolicy("offload"));
  QVERIFY(p->setPolicyParam("what", "checkpoints"));
  QVERIFY(!p->setPolicyParam("what", "everything"));
  QCOMPARE(p->request()->policy.params.at("what"), std::string("checkpoints"));
  QVERIFY(p->selectPolicy("selective"));
  QVERIFY(p->setPolicyParam("recompute", "ln1.out+ln2.out"));
  QCOMPARE(p->request()->policy.params.at("recompute"), std::string("ln1.out+ln2.out"));
  QTRY_VERIFY_WITH_TIMEOUT(!p->predictionPending(), 30000);
  QVERIFY2(p->lastPrediction().ok, qPrintable(p->lastPrediction().error));
}

void GuiRunTest::cudaIsOfferedOnlyWhereItWorks() {
  MainWindow w(options());
  const bool offered = w.runPanel()->deviceBox()->findData("cuda") >= 0;
  QCOMPARE(offered, cuda_available());
  QVERIFY(w.runPanel()->deviceBox()->findData("cpu") >= 0);
}

void GuiRunTest::budgetPlansWithStepTimesOfARun() {
  MainWindow w(options());
  QVERIFY(showOneStepOfTiny(w));
  RunPanel* p = w.runPanel();
  // A run of none gives the step times.
  QVERIFY(p->selectPolicy("none"));
  QTRY_VERIFY_WITH_TIMEOUT(!p->predictionPending(), 30000);
  QSignalSpy finished(&w, &MainWindow::runFinished);
  QTest::mouseClick(p->runButton(), Qt::LeftButton);
  QVERIFY(finished.wait(120000));
  const QString measured = w.runs()->at(w.runs()->rowCount() - 1).dir;
  QVERIFY(!measured.isEmpty());
  // budget planned with them: predicted, run, and the unit recorded in the run's provenance.
  QVERIFY(p->selectPolicy("budget"));
  p->setMemoryBudget(tinyBudget());
  p->setCostsFrom(measured);
  QTRY_VERIFY_WITH_TIMEOUT(!p->predictionPending(), 30000);
  QVERIFY2(p->lastPrediction().ok, qPrintable(p->lastPrediction().error));
  QTest::mouseClick(p->runButton(), Qt::LeftButton);
  QVERIFY(finished.wait(120000));
  const RunEntry& e = w.runs()->at(w.runs()->rowCount() - 1);
  QVERIFY(e.trace->complete);
  bool recorded = false;
  for (const auto& [k, v] : e.trace->provenance)
    if (k == "planner_costs") recorded = v.find(measured.toStdString()) != std::string::npos;
  QVERIFY2(recorded, "the run does not record the measured step costs it was planned with");
  // Another model than the measured one: the prediction names the field, Run is off.
  QVERIFY(p->selectModel("small"));
  QTRY_VERIFY_WITH_TIMEOUT(!p->predictionPending(), 30000);
  QVERIFY(!p->lastPrediction().ok);
  QVERIFY2(p->lastPrediction().error.contains("differs from the planned model"),
           qPrintable(p->lastPrediction().error));
  QVERIFY(!p->runButton()->isEnabled());
  // A directory that is not a run: named in the message.
  QVERIFY(p->selectModel("tiny"));
  p->setCostsFrom(tmp_.filePath("no-such-run"));
  QTRY_VERIFY_WITH_TIMEOUT(!p->predictionPending(), 30000);
  QVERIFY(!p->lastPrediction().ok);
  QVERIFY2(p->lastPrediction().error.contains("no-such-run"), qPrintable(p->lastPrediction().error));
  // Cleared: FLOPs again, and the plan works.
  p->setCostsFrom({});
  QTRY_VERIFY_WITH_TIMEOUT(!p->predictionPending(), 30000);
  QVERIFY2(p->lastPrediction().ok, qPrintable(p->lastPrediction().error));
}

// A run of a mixture of experts: its header names its most uneven layer and how uneven.
void GuiRunTest::headerSaysHowUnevenTheRoutingWas() {
  Trace t;
  t.model = resolve_model("tiny");
  QVERIFY(!run_header(t).contains("routing"));
  t.model.moe = MoeConfig{4, 2, 32};
  for (int layer : {0, 1})
    for (int e = 0; e < 4; ++e) {  // 16 tokens x top-2: layer 0 balanced, layer 1 has 12 on expert 2
      const std::uint64_t n = layer == 0 ? 8u : e == 2 ? 12u : e == 3 ? 8u : 6u;
      t.routing.push_back({0, layer, e, n, n});
    }
  const QString h = run_header(t);
  QVERIFY2(h.contains(QString("routing: busiest expert 1.50× the mean (layer 1)").toHtmlEscaped()), qPrintable(h));
}

QTEST_MAIN(GuiRunTest)
#include "gui_run_test.moc"
