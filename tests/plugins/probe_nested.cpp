// A plugin whose load probe replies with half a million nested arrays (the reply just under the
// probe's 1 MiB) where its declarations belong, a well-formed reply otherwise: the parent must refuse the reply, not overflow its stack
// copying or reading it.
#include <string>
#include <unistd.h>

#include "core/plugin/policy.h"

namespace {

void reply_nested() {
  constexpr int kDepth = 500000;
  const std::string reply = "{\"remat_child_reply\": 1, \"ok\": " + std::string(kDepth, '[') + std::string(kDepth, ']') + "}";
  for (std::size_t done = 0; done < reply.size();) {
    ssize_t n = ::write(3, reply.data() + done, reply.size() - done);  // the reply pipe of the child
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::_exit(0);
}

class ProbeNested final : public remat::Policy {
 public:
  std::string name() const override { return "probe_nested"; }
  std::string description() const override {
    reply_nested();
    return "";
  }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  remat::Schedule plan(const remat::PlanContext& ctx) const override { return remat::store_all_schedule(ctx.blocks); }
};

}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(ProbeNested)
