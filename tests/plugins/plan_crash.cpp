// A plugin that loads but whose plan crashes (SIGSEGV): the plan fails with the file and the
// signal; the program that asked keeps running.
#include <csignal>

#include "core/plugin/policy.h"

namespace {
class PlanCrash final : public remat::Policy {
 public:
  std::string name() const override { return "plan_crash"; }
  std::string description() const override { return "crashes when asked to plan"; }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    std::raise(SIGSEGV);
    return remat::store_all_schedule(ctx.blocks);
  }
};
}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(PlanCrash)
