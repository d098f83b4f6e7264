#include "fuzz/tiny_run.h"

#include "core/backend/cpu/cpu_backend.h"
#include "core/engine/run.h"
#include "core/io/weight_files.h"
#include "core/model/param_layout.h"
#include "core/profiler/host_profiler.h"
#include "core/trace/run_dir.h"
#include "fuzz/fuzz_util.h"

namespace remat::fuzz {

ModelConfig tiny_model() {
  ModelConfig m;
  m.name = "fuzz";
  m.layers = 2;
  m.hidden = 32;
  m.heads = 2;
  m.kv_heads = 2;
  m.ffn = 64;
  m.seq = 8;
  m.positions = 8;
  m.batch = 1;
  m.dropout = 0.1;
  return m;
}

Trace tiny_run(const std::string& weights_out) {
  RunSpec spec;
  spec.model = tiny_model();
  spec.schedule = store_all_schedule(spec.model.layers);
  spec.warmup = 0;
  spec.steps = 1;
  spec.weights_out = weights_out;
  CpuBackend backend(1);
  SteadyClock clock;
  HostProfiler profiler(clock);
  return run_training(spec, backend, &profiler, clock);
}

const std::string& tiny_shards() {
  static const std::string dir = [] {
    const std::string d = scratch_path("shards");
    const ParamLayout layout(tiny_model());
    write_weights(d, std::vector<float>(static_cast<std::size_t>(layout.total()), 0.0f), layout, 16 << 10);
    return d;
  }();
  return dir;
}

const std::vector<std::string>& run_dir_files() {
  static const std::vector<std::string> files = [] {
    std::vector<std::string> f = {kSummaryFile, kScheduleFile};
    for (const auto& t : csv_table_files()) f.push_back(t);
    return f;
  }();
  return files;
}

}  // namespace remat::fuzz
