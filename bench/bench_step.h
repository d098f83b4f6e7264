// One CPU training run of `model` that stores every activation (the `none` schedule), `steps`
// counted steps after one warmup, on a 2-thread backend: the step the engine benches time.
#pragma once
#include "core/backend/cpu/cpu_backend.h"
#include "core/engine/run.h"
#include "core/profiler/host_profiler.h"
#include "core/schedule/schedule.h"

namespace remat::bench {

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
