#include "step_costs.h"

#include <filesystem>

#include "core/analysis/measured_costs.h"
#include "core/graph/block_graph.h"
#include "core/trace/run_dir.h"
#include "core/util/error.h"

namespace fs = std::filesystem;

namespace remat::cli {

CLI::Option* add_costs_from_option(CLI::App& app, std::string& dir) {
  return app.add_option("--costs-from", dir,
                        "plan with step costs measured in this run directory (ns, e.g. a run of "
                        "`none` with --out) instead of FLOPs");
}

std::optional<StepCosts> load_step_costs(const std::string& dir, const ModelConfig& m) {
  if (dir.empty()) return std::nullopt;
  try {
    std::error_code ec;
    if (fs::exists(fs::path(dir) / "sweep.json", ec))
      throw Error("a sweep directory, not a run directory; name one of its runs, e.g. " +
                  (fs::path(dir) / "none").string());
    Trace t = read_run_dir(dir);
    StepCosts c;
    c.cost = measured_step_costs(t, BlockGraph(m));
    c.unit = "ns measured on " + t.device + " in " + dir;
    return c;
  } catch (const Error& e) {
    throw Error("--costs-from " + dir + ": " + e.what());
  }
}

void add_costs_provenance(Trace& t, const std::optional<StepCosts>& costs) {
  if (costs) t.provenance.emplace_back(kPlannerCostsKey, costs->unit);
}

}  // namespace remat::cli
