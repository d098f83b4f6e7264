#include "step_costs.h"

#include "core/util/error.h"

namespace remat::cli {

CLI::Option* add_costs_from_option(CLI::App& app, std::string& dir) {
  return app.add_option("--costs-from", dir,
                        "plan with step costs measured in this run directory (ns, e.g. a run of "
                        "`none` with --out) instead of FLOPs");
}

std::optional<StepCosts> load_step_costs(const std::string& dir, const ModelConfig& m) {
  if (dir.empty()) return std::nullopt;
  try {
    return step_costs_from_run_dir(dir, m);
  } catch (const Error& e) {
    throw Error("--costs-from " + dir + ": " + e.what());
  }
}

}  // namespace remat::cli
