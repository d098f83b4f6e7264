// Helpers of the desktop app's tests: a private settings and data location, and real traces
// trained directly through the engine (the same call the app's worker makes).
#pragma once
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QStandardPaths>
#include <QTest>
#include <memory>
#include <string>

#include "core/backend/cpu/cpu_backend.h"
#include "core/engine/run.h"
#include "core/model/model_source.h"
#include "core/plugin/registry.h"
#include "core/profiler/host_profiler.h"
#include "views/run_view.h"

namespace remat::gui::testing {

// Settings and recent runs go to the test locations, never the user's.
inline void isolate_settings() {
  QStandardPaths::setTestModeEnabled(true);
  QCoreApplication::setOrganizationName("RematLabTests");
  QCoreApplication::setApplicationName("rematlab-tests");
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

}  // namespace remat::gui::testing
