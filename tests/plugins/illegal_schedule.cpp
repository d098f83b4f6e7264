// A plugin whose plan reverses a block that was never run forward.
#include "core/plugin/policy.h"

namespace {
class IllegalSchedule final : public remat::Policy {
 public:
  std::string name() const override { return "illegal_schedule"; }
  std::string description() const override { return "backward before forward"; }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    remat::Schedule s;
    s.blocks = ctx.blocks;
    for (int b = ctx.blocks - 1; b >= 0; --b) s.backward(b);
    return s;
  }
};
}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(IllegalSchedule)
