// A second plugin named "none": the first one found wins, this one is reported.
#include "core/plugin/policy.h"

namespace {
class DuplicateNone final : public remat::Policy {
 public:
  std::string name() const override { return "none"; }
  std::string description() const override { return "an impostor"; }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    return remat::store_all_schedule(ctx.blocks);
  }
};
}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(DuplicateNone)
