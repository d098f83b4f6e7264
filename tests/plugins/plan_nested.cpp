// A plugin whose plan replies with a million nested arrays where the schedule belongs, a
// well-formed reply otherwise: the parent must refuse the reply, not overflow its stack copying or
// reading it.
#include <string>
#include <unistd.h>

#include "core/plugin/policy.h"

namespace {

class PlanNested final : public remat::Policy {
 public:
  std::string name() const override { return "plan_nested"; }
  std::string description() const override { return "replies with a million nested arrays"; }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  remat::Schedule plan(const remat::PlanContext&) const override {
    constexpr int kDepth = 1000000;
    const std::string reply =
        "{\"remat_child_reply\": 1, \"ok\": " + std::string(kDepth, '[') + std::string(kDepth, ']') + "}";
    for (std::size_t done = 0; done < reply.size();) {
      ssize_t n = ::write(3, reply.data() + done, reply.size() - done);  // the reply pipe of the child
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
};

}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(PlanNested)
