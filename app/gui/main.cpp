// rematlab: the desktop app. With --run it starts a run at once; with --screenshot it saves a
// PNG of the window when the run (or the opened run directory) is shown, and exits.
#include <QApplication>
#include <QElapsedTimer>
#include <QCommandLineParser>
#include <QTabWidget>
#include <QTimer>
#include <QToolButton>
#include <memory>
#include <algorithm>
#include <cstdio>

#include "core/plugin/registry.h"
#include "guarded_application.h"
#include "core/trace/summary.h"
#include "main_window.h"
#include "views/memory_timeline_view.h"
#include "views/diff_view.h"
#include "views/op_timeline_view.h"
#include "views/run_view.h"
#include "run_panel.h"
#include "theme.h"

using namespace remat::gui;

namespace {

int fail(const QString& msg) {
  std::fprintf(stderr, "rematlab: %s\n", msg.toLocal8Bit().constData());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  GuardedApplication app(argc, argv);
  QApplication::setOrganizationName("RematLab");
  QApplication::setApplicationName("rematlab");
  QApplication::setApplicationVersion(QString::fromStdString(remat::program_version()));
  QApplication::setWindowIcon(app_icon());

  QCommandLineParser cl;
  cl.setApplicationDescription("RematLab: what activation checkpointing costs, on a real training step.");
  cl.addHelpOption();
  cl.addVersionOption();
  QCommandLineOption run({"r", "run"}, "Run MODEL (a preset or a model / Hugging Face JSON) at once.", "MODEL");
  QCommandLineOption policy({"p", "policy"}, "Policy for --run: NAME[:param=value,...] (default none).", "POLICY", "none");
  QCommandLineOption steps("steps", "Counted steps for --run (default 1).", "N", "1");
  QCommandLineOption warmup("warmup", "Warmup steps for --run (default 1).", "N", "1");
  QCommandLineOption seed("seed", "Seed for --run.", "N", "0");
  QCommandLineOption device("device", "Device for --run: cpu or cuda.", "DEVICE", "cpu");
  QCommandLineOption budget("memory-budget", "Activation budget for --run, e.g. 2MiB.", "SIZE");
  QCommandLineOption shot("screenshot", "Save a PNG of the window once the run is shown, then exit.", "FILE");
  QCommandLineOption runs_dir("runs-dir", "Save finished runs here (default: the settings' directory).", "DIR");
  QCommandLineOption no_save("no-save", "Do not save finished runs as run directories.");
  QCommandLineOption theme("theme", "light, dark or system.", "THEME");
  QCommandLineOption tab("page", "Show this page first: timeline, compare, analysis, diff or ranks.", "PAGE", "timeline");
  QCommandLineOption timeout("timeout", "With --screenshot: give up after this many seconds (default 600).", "S", "600");
  QCommandLineOption act_only("activations-only", "With --screenshot: show the memory timeline with its Activations only button on.");
  QCommandLineOption size("size", "The window's size, WIDTHxHEIGHT (e.g. 1280x800).", "WxH");
  QCommandLineOption fields("fields", "Show the Setup panel's model fields.");
  QCommandLineOption op_shot("op-screenshot", "With --screenshot: also save a PNG of the op timeline zoomed on a few ops of the forward.", "FILE");
  QCommandLineOption mem_view("memory-view",
                              "With --screenshot: show the memory timeline as stacked categories (stacked, the "
                              "default) or one band per allocation (allocations).",
                              "MODE", "stacked");
  for (const auto& o : {run, policy, steps, warmup, seed, device, budget, shot, runs_dir, no_save, theme, tab, timeout,
                        act_only, size, fields, op_shot, mem_view})
    cl.addOption(o);
  cl.addPositionalArgument("run-dirs", "Run directories to open.", "[run-dir...]");
  cl.process(app);

  const bool batch = cl.isSet(shot);
  WindowOptions wo;
  wo.runs_dir = cl.value(runs_dir);
  wo.save_runs = !cl.isSet(no_save);
  wo.restore_settings = !batch;
  wo.error_dialogs = !batch;
  app.setErrorDialogs(!batch);
  if (!batch || cl.isSet(theme)) apply_theme(app, theme_from_string(cl.value(theme)));
  if (batch && !cl.isSet(theme)) apply_theme(app, ThemeChoice::Light);
  MainWindow w(wo);
  if (cl.isSet(theme)) w.setTheme(theme_from_string(cl.value(theme)));
  if (cl.isSet(size)) {
    const QStringList wh = cl.value(size).split('x');
    bool ok_w = false, ok_h = false;
    const int width = wh.size() == 2 ? wh[0].toInt(&ok_w) : 0, height = wh.size() == 2 ? wh[1].toInt(&ok_h) : 0;
    if (!ok_w || !ok_h || width < 200 || height < 200 || width > 16384 || height > 16384)
      return fail("--size wants WIDTHxHEIGHT, each from 200 to 16384, got '" + cl.value(size) + "'");
    w.resize(width, height);
  }
  if (cl.isSet(fields)) w.runPanel()->fieldsToggle()->setChecked(true);
  w.show();

  const QString shot_path = cl.value(shot);
  const int page = QStringList{"timeline", "compare", "analysis", "diff", "ranks"}.indexOf(cl.value(tab));
  if (page < 0) return fail("unknown page '" + cl.value(tab) + "' (timeline, compare, analysis, diff, ranks)");
  const int memory_view = QStringList{"stacked", "allocations"}.indexOf(cl.value(mem_view));
  if (memory_view < 0) return fail("unknown memory view '" + cl.value(mem_view) + "' (stacked, allocations)");
  const MemoryMode memory_mode = memory_view == 1 ? MemoryMode::Allocations : MemoryMode::Stacked;
  // The screenshot is taken once every run directory is read and the run has ended.
  auto waiting = std::make_shared<int>((cl.positionalArguments().isEmpty() ? 0 : 1) + (cl.isSet(run) ? 1 : 0));
  auto all_ok = std::make_shared<bool>(true);
  const bool focus_activations = cl.isSet(act_only);
  const QString op_shot_path = cl.value(op_shot);
  auto finish = [&w, shot_path, op_shot_path, page, waiting, all_ok, focus_activations, memory_mode](bool ok) {
    *all_ok = *all_ok && ok;
    if (--*waiting > 0 || shot_path.isEmpty()) return;
    ok = *all_ok;
    // ... and the run shown has loaded into the views.
    auto shoot = [&w, shot_path, op_shot_path, page, ok, focus_activations, memory_mode] {
      w.pages()->setCurrentIndex(page);
      // The Diff page diffs on a worker once shown: the picture waits for it.
      QElapsedTimer waited;
      waited.start();
      QApplication::processEvents();
      while (w.diffView()->busy() && waited.elapsed() < 120000)
        QApplication::processEvents(QEventLoop::AllEvents | QEventLoop::WaitForMoreEvents, 20);
      if (focus_activations) w.runView()->memory()->setActivationsOnly(true);
      w.runView()->memory()->setMemoryMode(memory_mode);
      QApplication::processEvents();
      QString err;
      if (!w.saveScreenshot(shot_path, &err)) {
        std::fprintf(stderr, "rematlab: %s\n", err.toLocal8Bit().constData());
        QApplication::exit(1);
        return;
      }
      std::printf("rematlab: screenshot %s\n", shot_path.toLocal8Bit().constData());
      if (!op_shot_path.isEmpty()) {
        // Six consecutive compute ops of the middle third, those whose longest op is the
        // smallest share of their time, so each is wide enough to show its edges.
        OpTimelineView* ops = w.runView()->ops();
        const auto& order = ops->tree().stream_ops(remat::Stream::Compute);
        std::size_t first = order.size() / 3;
        double best = 2;
        for (std::size_t k = order.size() / 3; k + 6 <= order.size() && k < 2 * order.size() / 3; ++k) {
          std::int64_t longest = 0;
          for (std::size_t j = k; j < k + 6; ++j)
            longest = std::max(longest, ops->trace()->ops[order[j]].end_ns - ops->trace()->ops[order[j]].start_ns);
          const double span = static_cast<double>(ops->trace()->ops[order[k + 5]].end_ns - ops->trace()->ops[order[k]].start_ns);
          if (span > 0 && longest / span < best) {
            best = longest / span;
            first = k;
          }
        }
        ops->zoomToComputeOps(first, 6);
        QApplication::processEvents();
        if (!ops->saveScreenshot(op_shot_path, &err)) {
          std::fprintf(stderr, "rematlab: %s\n", err.toLocal8Bit().constData());
          QApplication::exit(1);
          return;
        }
        std::printf("rematlab: op timeline screenshot %s\n", op_shot_path.toLocal8Bit().constData());
      }
      QApplication::exit(ok ? 0 : 1);
    };
    QTimer::singleShot(600, &w, [&w, shoot, ok] {
      RunView* v = w.runView();
      if (!v->loading()) return shoot();
      QObject::connect(v, &RunView::loaded, &w, shoot);
      QObject::connect(v, &RunView::loadFailed, &w, [](const QString& e) {
        std::fprintf(stderr, "rematlab: cannot show the run: %s\n", e.toLocal8Bit().constData());
        QApplication::exit(1);
      });
    });
  };
  QObject::connect(&w, &MainWindow::runFinished, &w, [&w, finish](int row) {
    const auto& t = *w.runs()->at(row).trace;
    if (!t.complete) std::fprintf(stderr, "rematlab: run %s: %s\n", t.status.c_str(), t.error.c_str());
    finish(t.complete);
  });
  QObject::connect(&w, &MainWindow::runFailed, &w, [finish](const QString& e) {
    std::fprintf(stderr, "rematlab: run failed: %s\n", e.toLocal8Bit().constData());
    finish(false);
  });
  // The directories given: one wait for all of them (a sweep directory opens many runs).
  auto opened_ok = std::make_shared<bool>(true);
  QObject::connect(&w, &MainWindow::openFailed, &w, [opened_ok](const QString& d, const QString& e) {
    std::fprintf(stderr, "rematlab: cannot open %s: %s\n", d.toLocal8Bit().constData(), e.toLocal8Bit().constData());
    *opened_ok = false;
  });
  QObject::connect(&w, &MainWindow::readsDone, &w, [finish, opened_ok] { finish(*opened_ok); });

  for (const QString& d : cl.positionalArguments()) w.openRunDir(d);

  if (cl.isSet(run)) {
    RunPanel* p = w.runPanel();
    const QString model = cl.value(run);
    if (!p->selectModel(model) && !p->loadModelFile(model)) return fail("unknown model '" + model + "'");
    remat::PolicyChoice choice;
    try {
      choice = remat::parse_policy_choice(cl.value(policy).toStdString());
    } catch (const std::exception& e) {
      return fail(e.what());
    }
    if (!p->selectPolicy(QString::fromStdString(choice.name))) return fail("unknown policy '" + QString::fromStdString(choice.name) + "'");
    for (const auto& [k, v] : choice.params)
      if (!p->setPolicyParam(QString::fromStdString(k), QString::fromStdString(v)))
        return fail("bad parameter " + QString::fromStdString(k) + "=" + QString::fromStdString(v));
    p->setSteps(cl.value(steps).toInt());
    p->setWarmup(cl.value(warmup).toInt());
    p->setSeed(cl.value(seed).toInt());
    if (!p->setDevice(cl.value(device))) return fail("device '" + cl.value(device) + "' is not available here");
    if (cl.isSet(budget)) p->setMemoryBudget(cl.value(budget));
    QTimer::singleShot(0, &w, [&w, finish] {
      if (!w.startRun()) {
        std::fprintf(stderr, "rematlab: cannot run: %s\n", w.runPanel()->errorText().toLocal8Bit().constData());
        finish(false);
      }
    });
  }
  if (batch) {
    if (!cl.isSet(run) && cl.positionalArguments().isEmpty()) {
      *waiting = 1;
      finish(true);
    }
    QTimer::singleShot(cl.value(timeout).toInt() * 1000, &app, [] {
      std::fprintf(stderr, "rematlab: timed out\n");
      QApplication::exit(3);
    });
  }
  return app.exec();
}
