// `none`: store everything. Every block runs forward once keeping its whole saved set, then
// backward from the last block to the first.
#include "core/plugin/policy.h"

namespace {

class NonePolicy final : public remat::Policy {
 public:
  std::string name() const override { return "none"; }
  std::string description() const override {
    return "store every activation; no recomputation (the baseline)";
  }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    return remat::store_all_schedule(ctx.blocks);
  }
};

}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(NonePolicy)
