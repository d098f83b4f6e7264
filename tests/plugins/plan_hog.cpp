// A plugin whose plan allocates and touches 1 GiB, 64 MiB at a time, then plans as `none` does:
// under a smaller REMAT_PLUGIN_MEMORY its planning process runs out of memory and the command
// says so instead of the machine running out.
#include <cstring>
#include <memory>
#include <vector>

#include "core/plugin/policy.h"

namespace {
class PlanHog final : public remat::Policy {
 public:
  std::string name() const override { return "plan_hog"; }
  std::string description() const override { return "takes a gigabyte to plan"; }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    std::vector<std::unique_ptr<char[]>> chunks;
    for (int i = 0; i < 16; ++i) {
      chunks.emplace_back(new char[64 << 20]);
      std::memset(chunks.back().get(), 1, 64 << 20);
    }
    return remat::store_all_schedule(ctx.blocks);
  }
};
}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(PlanHog)
