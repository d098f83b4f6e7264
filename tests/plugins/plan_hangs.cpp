// A plugin whose plan never returns: it is stopped at the plan time limit
// (REMAT_PLAN_TIMEOUT_S) and reported with its file.
#include <unistd.h>

#include "core/plugin/policy.h"

namespace {
class PlanHangs final : public remat::Policy {
 public:
  std::string name() const override { return "plan_hangs"; }
  std::string description() const override { return "never finishes planning"; }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  remat::Schedule plan(const remat::PlanContext&) const override {
    for (;;) ::pause();
  }
};
}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(PlanHangs)
