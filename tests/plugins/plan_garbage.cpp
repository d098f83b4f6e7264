// A plugin whose plan scribbles: text on standard output and on every other descriptor it may
// have inherited (3..255), then a valid schedule. None of it may reach the program's own
// output, and a reply that is not a schedule is reported with the file.
#include <cstdio>
#include <iostream>
#include <unistd.h>

#include "core/plugin/policy.h"

namespace {
constexpr char kGarbage[] = "GARBAGE FROM plan_garbage {not json\n";

class PlanGarbage final : public remat::Policy {
 public:
  std::string name() const override { return "plan_garbage"; }
  std::string description() const override { return "writes garbage while planning"; }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    std::cout << kGarbage << std::flush;
    std::printf("%s", kGarbage);
    std::fflush(stdout);
    for (int fd = 1; fd < 256; ++fd)
      if (fd != 2) (void)!::write(fd, kGarbage, sizeof kGarbage - 1);
    return remat::store_all_schedule(ctx.blocks);
  }
};
}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(PlanGarbage)
