// --costs-from RUN_DIR (plan, run, sweep): the budget planner's step costs measured in a run
// directory instead of FLOPs (core/analysis/measured_costs.h).
#pragma once
#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "core/analysis/measured_costs.h"  // kPlannerCostsKey, add_costs_provenance
#include "core/model/model_config.h"
#include "core/plugin/registry.h"

namespace remat::cli {

// The unit of the costs the registry uses without measured ones.
inline constexpr const char* kFlopsUnit = "flops";

CLI::Option* add_costs_from_option(CLI::App& app, std::string& dir);

// Nothing when `dir` is empty; else the step costs of `m`'s blocks measured in the run
// directory, in ns ("ns measured on DEVICE in DIR"). Throws Error in one line:
// "--costs-from DIR: what is wrong" (not a run directory, another model, missing steps).
std::optional<StepCosts> load_step_costs(const std::string& dir, const ModelConfig& m);

}  // namespace remat::cli
