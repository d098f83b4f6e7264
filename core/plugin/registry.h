// Finds, loads and checks policy plugins: first the plugin directory next to the binaries,
// then each directory in REMAT_PLUGIN_PATH (never the current directory). A broken library
// is rejected with the file and the reason; everything else keeps working.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/plugin/policy.h"

namespace remat {

struct LoadedPolicy {
  std::string file;
  std::unique_ptr<Policy> policy;
  void* handle = nullptr;
};

struct RejectedPlugin {
  std::string file;
  std::string reason;
};

// A policy chosen by the user: "name" or "name:k=v,k=v".
struct PolicyChoice {
  std::string name;
  std::map<std::string, std::string> params;
};
PolicyChoice parse_policy_choice(const std::string& text);

// Costs of one forward of each block step (table order) to plan with instead of FLOPs, and
// their unit (PlanContext::step_cost, cost_unit), e.g. from core/analysis/measured_costs.h.
struct StepCosts {
  std::vector<double> cost;
  std::string unit;
};

class PolicyRegistry {
 public:
  PolicyRegistry() = default;
  ~PolicyRegistry();
  PolicyRegistry(const PolicyRegistry&) = delete;
  PolicyRegistry& operator=(const PolicyRegistry&) = delete;

  // The default search path: <exe dir>/plugins, <exe dir>/../lib/rematlab/plugins, then
  // REMAT_PLUGIN_PATH entries (absolute paths only; relative ones would name the working directory).
  static std::vector<std::string> default_dirs();
  void load_dirs(const std::vector<std::string>& dirs);
  void load_file(const std::string& path);

  const std::vector<LoadedPolicy>& policies() const { return loaded_; }
  const std::vector<RejectedPlugin>& rejected() const { return rejected_; }
  const Policy* find(const std::string& name) const;
  std::vector<std::string> names() const;

  // Checks the parameters against the declarations (types, ranges, choices, names) and fills
  // defaults. Throws ConfigError naming the parameter.
  ParamValues check_params(const Policy& p, const std::map<std::string, std::string>& given,
                           const BlockGraph* graph) const;
  // Plans with a policy and validates the result; a plugin that throws or returns an illegal
  // schedule is reported with its file. The policy gets `costs` when given (one finite,
  // non-negative entry per block step, else Error), else the steps' forward FLOPs. Throws Error.
  Schedule plan(const PolicyChoice& choice, const ModelConfig& m,
                std::optional<std::uint64_t> memory_budget = std::nullopt,
                const StepCosts* costs = nullptr) const;

 private:
  std::vector<LoadedPolicy> loaded_;
  std::vector<RejectedPlugin> rejected_;
};

// Parses sizes such as "4096", "512MiB", "2GB", "1.5GiB". Throws ConfigError.
std::uint64_t parse_bytes(const std::string& field, const std::string& text);

}  // namespace remat
