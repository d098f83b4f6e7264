// Small models and a one-call training run for engine tests.
#pragma once
#include "core/backend/cpu/cpu_backend.h"
#include "core/engine/run.h"
#include "core/profiler/host_profiler.h"
#include "core/schedule/schedule.h"

namespace remat::testing {

inline ModelConfig small_model(Family arch, AttentionImpl attn, double dropout,
                               DType dtype = DType::BF16) {
  ModelConfig m;
  m.name = "test";
  set_family(m, arch);
  m.layers = 3;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = arch == Family::Llama ? 2 : 4;
  m.ffn = arch == Family::Llama ? 176 : 256;
  m.seq = 32;
  m.positions = 32;
  m.batch = 2;
  m.vocab = 256;
  m.dropout = dropout;
  m.attention = attn;
  m.dtype = dtype;
  return m;
}

// Full recomputation: every block keeps only its input, and is recomputed before its backward.
inline Schedule checkpoint_all_schedule(int blocks) {
  Schedule s;
  s.policy = "uniform";
  s.blocks = blocks;
  for (int b = 0; b < blocks; ++b) s.forward(b, Keep::input());
  for (int b = blocks - 1; b >= 0; --b) {
    s.recompute(b, Keep::all());
    s.backward(b);
  }
  return s;
}

inline Trace train(const ModelConfig& m, const Schedule& s, int steps, std::uint64_t seed,
                   bool poison = false, int warmup = 0, float lr = 1e-3f) {
  CpuBackend be(2);
  SteadyClock clock;
  HostProfiler prof(clock);
  RunSpec spec;
  spec.model = m;
  spec.schedule = s;
  spec.steps = steps;
  spec.warmup = warmup;
  spec.seed = seed;
  spec.poison = poison;
  spec.adam.lr = lr;
  return run_training(spec, be, &prof, clock);
}

}  // namespace remat::testing
