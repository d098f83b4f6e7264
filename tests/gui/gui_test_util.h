// Helpers of the desktop app's tests: a private settings and data location, a window's options
// for a test, real traces trained directly through the engine (the same call the app's worker
// makes), and the memory timeline's expected stacks computed from a trace's points.
#pragma once
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "core/analysis/memory_timeline.h"

#include "core/backend/cpu/cpu_backend.h"
#include "core/engine/run.h"
#include "core/model/model_source.h"
#include "core/plugin/registry.h"
#include "core/profiler/host_profiler.h"
#include "main_window.h"
#include "tests/test_paths.h"
#include "views/run_view.h"

namespace remat::gui::testing {

// tests/gui/data in the source tree (tests/test_paths.h: the paths are not compile definitions).
inline QString gui_test_data() { return QString::fromUtf8(REMAT_SOURCE_DIR) + "/tests/gui/data"; }

// Settings and recent runs go to the test locations, never the user's.
inline void isolate_settings() {
  QStandardPaths::setTestModeEnabled(true);
  QCoreApplication::setOrganizationName("RematLabTests");
  QCoreApplication::setApplicationName("rematlab-tests");
}

// A window that keeps no settings, saves its runs (when `save_runs`) under `dir`/runs, and shows
// unreadable run directories in a dialog only when `error_dialogs`.
inline WindowOptions window_options(const QTemporaryDir& dir, bool save_runs = true, bool error_dialogs = true) {
  WindowOptions o;
  o.runs_dir = dir.filePath("runs");
  o.restore_settings = false;
  o.save_runs = save_runs;
  o.error_dialogs = error_dialogs;
  return o;
}

// Waits until the run view is done loading the run it was given (the worker builds its views'
// data); true when the run is shown, false when the load failed or took over `ms`.
inline bool wait_loaded(const RunView& v, int ms = 120000) {
  QElapsedTimer t;
  t.start();
  while (v.loading() && t.elapsed() < ms) QTest::qWait(2);
  return !v.loading() && !v.loadingPageShown();
}

inline const PolicyRegistry& registry() {
  static PolicyRegistry* reg = [] {
    auto* r = new PolicyRegistry;
    r->load_dirs(PolicyRegistry::default_dirs());
    return r;
  }();
  return *reg;
}

// Trains `model` under `policy` ("name" or "name:k=v") on the CPU.
inline std::shared_ptr<const Trace> train(const std::string& model, const std::string& policy, int steps = 1,
                                          std::optional<std::uint64_t> budget = std::nullopt) {
  ModelConfig m = resolve_model(model);
  Schedule s = registry().plan(parse_policy_choice(policy), m, budget);
  CpuBackend be(2);
  SteadyClock clock;
  HostProfiler prof(clock);
  RunSpec spec;
  spec.model = m;
  spec.schedule = s;
  spec.steps = steps;
  spec.warmup = 0;
  return std::make_shared<const Trace>(run_training(spec, be, &prof, clock));
}

// The live bytes of `keep`'s device categories at a point of the memory timeline: the top of the
// stack (or of the bands) the memory timeline draws there.
inline double shown_live_bytes(const TimelinePoint& p, const std::function<bool(Category)>& keep) {
  double s = 0;
  for (int c = 0; c < kNumCategories; ++c)
    if (keep(static_cast<Category>(c)) && static_cast<Category>(c) != Category::HostOffloaded)
      s += static_cast<double>(p.live[c]);
  return s;
}

// 1.15 × the highest sum over the step's points of the live bytes of `keep`'s categories.
inline double fitted_top(const Trace& t, const std::function<bool(Category)>& keep) {
  double best = 0;
  for (const TimelinePoint& p : memory_timeline(t).points) best = std::max(best, shown_live_bytes(p, keep));
  return 1.15 * best;
}

// The stacked live bytes of `keep`'s categories at each time of the step, after the last event
// at that time (the state the bands show there).
inline std::map<std::int64_t, double> stacked_per_time(const Trace& t, const std::function<bool(Category)>& keep) {
  std::map<std::int64_t, double> out;
  for (const TimelinePoint& p : memory_timeline(t).points) out[p.t_ns] = shown_live_bytes(p, keep);
  return out;
}

}  // namespace remat::gui::testing
