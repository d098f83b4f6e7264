// A plugin whose static initializer crashes (SIGSEGV while the library is being loaded, before
// any of its code is called): the load probe reports it with its file and the signal, and the
// program goes on without it.
#include <csignal>

#include "core/plugin/policy.h"

namespace {
struct CrashOnLoad {
  CrashOnLoad() { std::raise(SIGSEGV); }
};
const CrashOnLoad crash_on_load;

class StaticInitCrash final : public remat::Policy {
 public:
  std::string name() const override { return "static_init_crash"; }
  std::string description() const override { return "never gets this far"; }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    return remat::store_all_schedule(ctx.blocks);
  }
};
}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(StaticInitCrash)
