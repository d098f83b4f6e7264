// A plugin whose plan allocates and touches 1 GiB, 64 MiB at a time, then plans as `none` does:
// under a smaller REMAT_PLUGIN_MEMORY its planning process runs out of memory and the command
// says so instead of the machine running out. With REMAT_TEST_HOG_RESERVE_GIB=N it asks for N
// GiB at once and touches none of it: past the default limit (8 GiB) that fails in the planning
// process, where without a limit the system would hand it over untouched.
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
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
    if (const char* gib = std::getenv("REMAT_TEST_HOG_RESERVE_GIB")) {
      const std::size_t bytes = std::stoul(gib) << 30;
      std::unique_ptr<char[]> reserved(new char[bytes]);  // std::bad_alloc where the limit holds
      volatile char* first = reserved.get();  // used, so that the allocation is not left out
      *first = 1;
      return remat::store_all_schedule(ctx.blocks);
    }
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
