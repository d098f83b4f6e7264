// Options and helpers shared by the rematlab-batch commands.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/model/model_config.h"
#include "core/plugin/registry.h"
#include "core/schedule/schedule.h"

namespace remat::cli {

// --model and the overrides a user may put on top of it.
struct ModelOptions {
  std::string model = "tiny";
  std::optional<int> seq, batch, layers;
  std::optional<double> dropout;
  std::string attention, dtype;
  void add(CLI::App& app);
  ModelConfig resolve() const;  // throws Error / ConfigError
  ModelConfig apply(ModelConfig m) const;  // the overrides (--seq, ...) on m, validated
};

// --policy, --schedule, --memory-budget, --costs-from.
struct PolicyOptions {
  std::string policy = "none";
  std::string schedule_file;
  std::string memory_budget;
  std::string costs_from;  // a run directory (step_costs.h)
  void add(CLI::App& app, bool allow_schedule_file);
  // The schedule to run for this model (from a plugin or a file), validated. The plugin plans
  // with `costs` when given (load_step_costs), else with FLOPs.
  Schedule plan(const PolicyRegistry& reg, const ModelConfig& m,
                const std::optional<StepCosts>& costs = std::nullopt) const;
  // The same over a given block table (one rank's blocks); its config is the model.
  Schedule plan(const PolicyRegistry& reg, const BlockGraph& g,
                const std::optional<StepCosts>& costs = std::nullopt) const;
};

// Loads plugins from the default directories; prints rejected ones to stderr unless quiet.
void load_plugins(PolicyRegistry& reg, bool report);

// For options that name a file or directory: an empty one (`--out ''`) is refused when the
// command line is parsed instead of quietly meaning "none".
const CLI::Validator& non_empty_path();

// For unsigned 64-bit options (--seed): a decimal number from 0 to 2^64 - 1, nothing else (no
// sign, no wrap-around of -1, no saturation of 2^64).
const CLI::Validator& unsigned_64();

// Prints an error in one line and returns the exit code for it.
int fail(const std::string& message);
// The fields of an imported config that were accepted and ignored, comma-separated.
std::string ignored_list(const ModelConfig& m);
// The layers of each kind of a model that lists kinds, e.g. "27 full_attention, 9
// full_attention_no_rope (no RoPE)"; "" for a model of one kind.
std::string layer_kind_counts(const ModelConfig& m);
// The same for an exception a command let through; std::bad_alloc is said as running out of memory.
int fail(const std::exception& e);

// A progress bar on stderr when it is a terminal; silent otherwise.
class Progress {
 public:
  explicit Progress(bool enabled);
  void update(double fraction, const std::string& what);
  void done();

 private:
  bool on_;
  int last_ = -1;
};

std::string human_bytes(std::uint64_t b);

}  // namespace remat::cli
