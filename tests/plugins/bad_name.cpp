// A plugin named "a:b": `--policy a:b` would parse as policy "a" with parameter text "b", so
// the name can never be chosen and is refused.
#include "core/plugin/policy.h"

namespace {
class BadName final : public remat::Policy {
 public:
  std::string name() const override { return "a:b"; }
  std::string description() const override { return "a name with a colon"; }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    return remat::store_all_schedule(ctx.blocks);
  }
};
}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(BadName)
