// Finds, loads and checks policy plugins: first the plugin directory next to the binaries,
// then each directory in REMAT_PLUGIN_PATH (never the current directory). A broken library
// is rejected with the file and the reason; everything else keeps working.
//
// Plugins are kept out of harm's way: only regular files are considered; each is probed in a
// child process first (core/plugin/plugin_probe.h), and only one that passed is loaded here,
// with its declarations (name, description, parameters) read in the probe and kept. Every
// plan runs in a child process with a time limit (REMAT_PLAN_TIMEOUT_S, default 60 s) and
// sends its schedule back as JSON, so a plugin that throws, crashes, hangs or writes garbage
// fails that plan with its file named, and the program goes on.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/plugin/policy.h"

namespace remat {

// A plugin that passed its probe. The program reads name, description and params from here;
// the plugin's own code runs only in child processes (plan) and in create_policy_in_process.
struct LoadedPolicy {
  std::string file;
  std::string name;
  std::string description;
  std::vector<ParamDecl> params;
  bool takes_memory_budget = false;  // the policy plans to --memory-budget
  RematPolicyEntry entry = nullptr;
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
  const LoadedPolicy* find(const std::string& name) const;
  std::vector<std::string> names() const;

  // Checks the parameters against the declarations (types, ranges, choices, names) and fills
  // defaults. Throws ConfigError naming the parameter.
  ParamValues check_params(const LoadedPolicy& p, const std::map<std::string, std::string>& given,
                           const BlockGraph* graph) const;
  // Plans with a policy in a child process and validates the result; a plugin that throws,
  // crashes, runs past the time limit, sends garbage or returns an illegal schedule is reported
  // with its file. The policy gets `costs` when given (one finite, non-negative entry per block
  // step, else Error), else the steps' forward FLOPs. Throws Error.
  Schedule plan(const PolicyChoice& choice, const ModelConfig& m,
                std::optional<std::uint64_t> memory_budget = std::nullopt,
                const StepCosts* costs = nullptr) const;
  // The same over a given block table (one rank's, parallel_layout.h); its config is the model.
  Schedule plan(const PolicyChoice& choice, const BlockGraph& graph,
                std::optional<std::uint64_t> memory_budget = std::nullopt,
                const StepCosts* costs = nullptr) const;

  // Plans to each of `budgets` in one child process (Policy::plan_budgets: a policy may share
  // work across them, as a frontier's budgets), each schedule read and validated as plan()'s;
  // per budget the schedule or the reason there is none, with the file named. The child's time
  // limit is one plan's times the number of budgets. Throws Error (ConfigError for a policy
  // that takes no budget) when the child as a whole fails.
  std::vector<BudgetedPlan> plan_budgets(const PolicyChoice& choice, const BlockGraph& graph,
                                         const std::vector<std::uint64_t>& budgets,
                                         const StepCosts* costs = nullptr) const;

  // The time limit of one plan in seconds: set_plan_timeout's, else REMAT_PLAN_TIMEOUT_S (a
  // positive number; anything else is a ConfigError naming it), else 60.
  double plan_timeout_s() const;
  void set_plan_timeout(double seconds) { plan_timeout_s_ = seconds; }

 private:
  const LoadedPolicy& policy_for(const PolicyChoice& choice, bool with_budget) const;
  PlanContext context_for(const LoadedPolicy& lp, const PolicyChoice& choice, const BlockGraph& g,
                          const StepCosts* costs) const;
  nlohmann::json run_policy(const LoadedPolicy& lp, const std::string& who, double timeout_s,
                            const std::function<nlohmann::json(const Policy&)>& work) const;

  std::vector<LoadedPolicy> loaded_;
  std::vector<RejectedPlugin> rejected_;
  double plan_timeout_s_ = 0;  // 0: from the environment
};

// The plugin's Policy created in this process, with none of the isolation above (a crash in it
// is the caller's crash): only for measuring plan() itself (bench/policy_planning_bench.cpp).
// An exception of the factory becomes Error naming the file. Destroy it before the registry.
std::unique_ptr<Policy> create_policy_in_process(const LoadedPolicy& p);

// Parses sizes such as "4096", "512MiB", "2GB", "1.5GiB". Throws ConfigError.
std::uint64_t parse_bytes(const std::string& field, const std::string& text);

}  // namespace remat
