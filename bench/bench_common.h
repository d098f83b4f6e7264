// What the engine benches share: the median of timed calls, and one CPU training run that
// stores every activation (the `none` schedule).
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/engine/run.h"
#include "core/profiler/host_profiler.h"
#include "core/schedule/schedule.h"

namespace remat::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median wall time of `reps` calls of `f`, in ms.
template <class F>
double time_ms(int reps, F&& f) {
  std::vector<double> v;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    v.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(v);
}

// `steps` counted steps after one warmup, on a 2-thread backend: the step the engine benches time.

inline Trace train_none(const ModelConfig& m, int steps) {
  CpuBackend be(2);
  SteadyClock clock;
  RunSpec spec;
  spec.model = m;
  spec.schedule = store_all_schedule(m.layers);
  spec.steps = steps;
  spec.warmup = 1;
  return run_training(spec, be, nullptr, clock);
}

}  // namespace remat::bench
