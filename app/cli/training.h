// Training one schedule the way every command does it: the measurement protocol (warmup steps
// run and not counted, then counted steps), the device, the provenance of the program.
#pragma once
#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dist/communicator.h"
#include "core/model/model_config.h"
#include "core/schedule/schedule.h"
#include "core/trace/trace.h"

namespace remat::cli {

struct TrainOptions {
  std::string device = "cpu";
  int steps = 3, warmup = 1, threads = 2;
  std::uint64_t seed = 0;
  std::string memory_limit, corpus, tokens, tokens_dtype, dump_batch;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
  bool poison = false, no_profile = false;
  Communicator* comm = nullptr;  // a rank of a data-parallel run (dist_run.h); not an option
  Communicator* tp_comm = nullptr;  // a tensor-parallel rank's group of tp (dist_run.h)
  int tp = 1;
  bool sp = false;
  bool distribute_saved = false;  // checkpointed block inputs split over tp (dist_run.h)
  int zero = 0;  // ZeRO stage over comm's ranks (dist_run.h)
  Communicator* pp_comm = nullptr;   // a pipeline stage's group of the P stages (dist_run.h)
  Communicator* tie_comm = nullptr;  // the first and the last stage, with a tied embedding
  int pp = 1, micro_batches = 1, first_stage_layers = 0, last_stage_layers = 0;
  // Files the command read besides the data and weights (the model file, a schedule), with
  // their options: never written over (RunSpec::inputs). Not an option.
  std::vector<std::pair<std::string, std::string>> inputs;
  void add(CLI::App& app);
};

// The weights and gradient files of a run (rematlab-batch run's options; core/io/weight_files.h).
struct WeightOptions {
  std::string load, save, save_grads;
  std::uint64_t shard_bytes = 0;  // save and save_grads: 0 one file each, else directories of shards
};

// Runs warmup + counted steps of `s`. A run the memory check refuses before its first step
// comes back as an incomplete trace (status out_of_memory) rather than an exception, so it can
// be written and compared like any other; bad input still throws Error.
Trace train(const ModelConfig& m, const Schedule& s, const TrainOptions& o,
            std::optional<std::uint64_t> memory_budget,
            const std::function<void(double, const std::string&)>& progress,
            const std::atomic<bool>* cancel, const WeightOptions& weights = {});

// The command line, the time and the operating system, added to the trace's provenance.
void set_command_line(int argc, char** argv);
void add_cli_provenance(Trace& t);

// A flag set by SIGINT and SIGTERM (installed on first use): a run stops cleanly between ops.
std::atomic<bool>& interrupt_flag();

}  // namespace remat::cli
