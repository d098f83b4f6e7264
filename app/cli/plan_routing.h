// `plan --routing-from RUN` and `plan --moe-imbalance F`: the routing a prediction of a mixture of
// experts assumes. Balanced by default; F is the most-loaded expert's tokens over the mean; a run
// (routing.csv) gives what its router did, layer by layer, for the model and layout that ran.
// One rank holds every expert in one permuted buffer whose rows are fixed by the config
// (tokens·k dropless, experts·C with a capacity), so on one rank the peak is the same under any
// routing; the plan says which assumption it used and, for a recorded run, what the run measured.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/analysis/routing_load.h"
#include "core/model/model_config.h"
#include "core/schedule/schedule.h"

namespace remat::cli {

struct RoutingOptions {
  std::string from;                 // --routing-from: a run directory
  std::optional<double> imbalance;  // --moe-imbalance
  void add(CLI::App& app);
};

// What the run said (read once, before the model is known).
struct RecordedRouting {
  std::string dir;
  ModelConfig model;
  std::string policy, params, device, status;
  std::string layout;  // of a rank of several (a data-parallel run), else empty
  int threads = 1;     // its CPU backend's lanes (the plan's for it take as many)
  std::uint64_t peak_bytes = 0;
  std::vector<LayerLoad> loads;
};

// The routing of `o.from`, checked: a complete run of this program of a model with experts, not
// one pipeline stage of it. Throws Error naming the run and what is wrong.
RecordedRouting read_recorded_routing(const std::string& dir);

struct RoutingAssumption {
  std::string kind;        // "balanced", "imbalance" (--moe-imbalance) or "recorded"
  double imbalance = 1.0;  // assumed, or the most of the recorded layers
  std::optional<RecordedRouting> run;
};

// The assumption for model m (nullopt for a model without experts), checking the options against
// it: Error naming the option and the numbers.
std::optional<RoutingAssumption> routing_assumption(const RoutingOptions& o, const ModelConfig& m,
                                                    std::optional<RecordedRouting> run);

// The lines `plan` prints, and its JSON "routing": the assumption, a recorded run's layers and
// its measured peak beside the prediction (compared where the run had this model, policy and
// device).
void print_routing(const RoutingAssumption& a, const ModelConfig& m, const Schedule& s, const std::string& device,
                   std::uint64_t predicted_peak);
nlohmann::json routing_json(const RoutingAssumption& a, const ModelConfig& m, const Schedule& s,
                            const std::string& device, std::uint64_t predicted_peak);

}  // namespace remat::cli
