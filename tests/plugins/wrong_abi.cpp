// A plugin built for another ABI version.
#include "core/plugin/policy.h"

namespace {
class WrongAbi final : public remat::Policy {
 public:
  std::string name() const override { return "wrong_abi"; }
  std::string description() const override { return "built for ABI 999"; }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    return remat::store_all_schedule(ctx.blocks);
  }
};
}  // namespace

extern "C" __attribute__((visibility("default"))) const RematPolicyPlugin* remat_policy_plugin() {
  static const RematPolicyPlugin p{999, []() -> remat::Policy* { return new WrongAbi(); }};
  return &p;
}
