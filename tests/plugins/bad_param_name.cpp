// A plugin with a parameter named "k=v": `--policy bad_param_name:k=v=1` would set "k", so the
// parameter can never be given and the plugin is refused.
#include "core/plugin/policy.h"

namespace {
class BadParamName final : public remat::Policy {
 public:
  std::string name() const override { return "bad_param_name"; }
  std::string description() const override { return "a parameter name with '='"; }
  std::vector<remat::ParamDecl> params() const override {
    remat::ParamDecl d;
    d.name = "k=v";
    d.type = remat::ParamType::Int;
    d.default_value = "1";
    return {d};
  }
  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    return remat::store_all_schedule(ctx.blocks);
  }
};
}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(BadParamName)
