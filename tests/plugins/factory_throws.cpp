// A plugin whose factory throws (a policy-defined exception type, so the library must stay
// loaded until the exception is gone).
#include <stdexcept>

#include "core/plugin/policy.h"

namespace {
struct PluginFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
class FactoryThrows final : public remat::Policy {
 public:
  FactoryThrows() { throw PluginFailure("cannot start: no configuration"); }
  std::string name() const override { return "factory_throws"; }
  std::string description() const override { return ""; }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    return remat::store_all_schedule(ctx.blocks);
  }
};
}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(FactoryThrows)
