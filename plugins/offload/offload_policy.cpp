// `offload`: keep activations in host memory between a block's forward and its backward.
//
//   what=activations  every block keeps its whole saved set; after its forward the block's
//                     tensors are moved to host memory and they come back `prefetch` blocks
//                     ahead of its backward (before the backward of block b + prefetch). The
//                     last `prefetch` blocks would come back at once, so they stay on the device.
//   what=checkpoints  per-block checkpointing (uniform with segments = L) whose checkpoints,
//                     the block inputs, live on the host: one block input of traffic each way
//                     per block and one recompute per block; the last block keeps everything.
//
// Host bytes are allocated in the host memory pool under the host_offloaded category.
#include <string>
#include <vector>

#include "core/plugin/policy.h"
#include "core/util/error.h"

namespace {

class OffloadPolicy final : public remat::Policy {
 public:
  std::string name() const override { return "offload"; }
  std::string description() const override {
    return "move saved activations (or per-block checkpoints) to host memory, prefetch them before backward";
  }
  std::vector<remat::ParamDecl> params() const override {
    remat::ParamDecl what;
    what.name = "what";
    what.type = remat::ParamType::String;
    what.default_value = "activations";
    what.choices = {"activations", "checkpoints"};
    what.help = "activations: every saved tensor goes to the host; checkpoints: per-block "
                "checkpoints on the host, one recompute per block";
    remat::ParamDecl pre;
    pre.name = "prefetch";
    pre.type = remat::ParamType::Int;
    pre.default_value = "1";
    pre.min = 0;
    pre.max = 1e9;
    pre.help = "how many blocks ahead of its backward a block comes back (0: just before it)";
    return {what, pre};
  }

  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    const int L = ctx.blocks;
    const std::string what = ctx.params.get_string("what");
    const long long p = ctx.params.get_int("prefetch");
    if (p < 0) throw remat::Error("prefetch must be 0 or more, got " + std::to_string(p));
    const bool ckpt = what == "checkpoints";
    // Blocks that go to the host: those whose return would not come before the sweep turns,
    // and with checkpoints never the last block (it keeps everything for its backward).
    auto offloaded = [&](int b) {
      return static_cast<long long>(b) + p < L && (!ckpt || b < L - 1);
    };
    remat::Schedule s;
    s.blocks = L;
    s.params = "what=" + what + ",prefetch=" + std::to_string(p);
    for (int b = 0; b < L; ++b) {
      if (ckpt && b < L - 1) s.forward(b, remat::Keep::input());
      else s.forward(b, remat::Keep::all());
      if (offloaded(b)) s.offload(b);
    }
    for (int b = L - 1; b >= 0; --b) {
      long long back = static_cast<long long>(b) - p;  // comes back now
      if (back >= 0 && offloaded(static_cast<int>(back))) s.prefetch(static_cast<int>(back));
      if (ckpt && b < L - 1) s.recompute(b, remat::Keep::all());
      s.backward(b);
    }
    return s;
  }
};

}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(OffloadPolicy)
