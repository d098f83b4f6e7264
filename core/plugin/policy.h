// The checkpoint-policy plugin boundary.
//
// A plugin is a shared library exporting one C symbol, `remat_policy_plugin`, that returns a
// RematPolicyPlugin: the ABI version it was built for and a factory. Inside, a C++ interface:
// name, one-line description, declared parameters, and plan(context) -> Schedule. Plugins are
// built with the same compiler and standard library as the program (they link librematcore).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/graph/block_graph.h"
#include "core/model/model_config.h"
#include "core/schedule/schedule.h"

#define REMAT_POLICY_ABI_VERSION 4

namespace remat {

enum class ParamType { Int, Float, Bool, String, Names };
const char* to_string(ParamType t);

struct ParamDecl {
  std::string name;
  ParamType type = ParamType::Int;
  std::string default_value;         // as a user would type it; "" = none (optional)
  double min = 0.0, max = 0.0;       // inclusive range for Int and Float when min < max
  std::vector<std::string> choices;  // allowed values for String, when not empty
  std::string help;
};

// Parsed parameter values, checked against the declarations.
class ParamValues {
 public:
  bool has(const std::string& k) const { return values_.count(k) > 0; }
  long long get_int(const std::string& k) const;
  double get_float(const std::string& k) const;
  bool get_bool(const std::string& k) const;
  std::string get_string(const std::string& k) const;
  std::vector<std::string> get_names(const std::string& k) const;  // '+'-separated list
  void set(const std::string& k, const std::string& v) { values_[k] = v; }
  const std::map<std::string, std::string>& raw() const { return values_; }
  std::string to_string() const;  // "k=v,k=v"

 private:
  std::map<std::string, std::string> values_;
};

struct PlanContext {
  const ModelConfig* model = nullptr;
  const BlockGraph* graph = nullptr;
  int blocks = 0;
  ParamValues params;
  // Costs of one forward of each block step (table order); FLOPs until measured times exist.
  std::vector<double> step_cost;
  std::string cost_unit = "flops";
  // Activation bytes allowed (everything the blocks save, checkpoints included), if given.
  std::optional<std::uint64_t> memory_budget;
  // Exact activation peak (bytes) of a schedule, from the simulator; may be empty.
  std::function<std::uint64_t(const Schedule&)> activation_peak;
};

// One of several plans made in one go (Policy::plan_budgets): the schedule, or why there is
// none (the message of the Error that plan() would have thrown).
struct BudgetedPlan {
  std::optional<Schedule> schedule;
  std::string error;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  virtual std::vector<ParamDecl> params() const = 0;
  // Whether plan() reads PlanContext::memory_budget; a budget given to any other policy is
  // refused, never silently ignored or recorded.
  virtual bool takes_memory_budget() const { return false; }
  // Throws Error when the parameters cannot be honoured (e.g. a budget below the minimum).
  virtual Schedule plan(const PlanContext& ctx) const = 0;
  // Plans to each of `budgets` (PlanContext::memory_budget set to each in turn; the rest of ctx
  // as given), one entry per budget: plan()'s schedule, or its Error's message. A policy whose
  // plans share work across budgets (the optimal policy's per-table choices) does it once here.
  virtual std::vector<BudgetedPlan> plan_budgets(const PlanContext& ctx, const std::vector<std::uint64_t>& budgets) const;
};

}  // namespace remat

extern "C" {
struct RematPolicyPlugin {
  int abi_version;
  remat::Policy* (*create)();
};
// Every plugin defines this.
typedef const RematPolicyPlugin* (*RematPolicyEntry)();
}

// Defines the entry point of a plugin whose policy class is `Cls`.
#define REMAT_DEFINE_POLICY_PLUGIN(Cls)                                            \
  extern "C" __attribute__((visibility("default"))) const RematPolicyPlugin*       \
  remat_policy_plugin() {                                                          \
    static const RematPolicyPlugin p{REMAT_POLICY_ABI_VERSION,                     \
                                     []() -> remat::Policy* { return new Cls(); }}; \
    return &p;                                                                     \
  }
