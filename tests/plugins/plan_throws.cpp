// A plugin that loads but whose plan throws.
#include <stdexcept>

#include "core/plugin/policy.h"

namespace {
class PlanThrows final : public remat::Policy {
 public:
  std::string name() const override { return "plan_throws"; }
  std::string description() const override { return "always fails to plan"; }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  remat::Schedule plan(const remat::PlanContext&) const override {
    throw std::runtime_error("out of ideas");
  }
};
}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(PlanThrows)
