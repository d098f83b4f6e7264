// `revolve`: Griewank & Walther binomial checkpointing with `snapshots` checkpoint slots (see
// revolve.h for the schedule and its optimality). Executes L + t(L, s) block forwards.
#include <cmath>
#include <string>
#include <vector>

#include "core/plugin/policy.h"
#include "core/util/error.h"
#include "plugins/revolve/revolve.h"

namespace {

class RevolvePolicy final : public remat::Policy {
 public:
  std::string name() const override { return "revolve"; }
  std::string description() const override {
    return "Griewank & Walther binomial checkpointing: fewest block forwards for a number of checkpoint slots";
  }
  std::vector<remat::ParamDecl> params() const override {
    remat::ParamDecl d;
    d.name = "snapshots";
    d.type = remat::ParamType::Int;
    d.min = 1;
    d.max = 1e9;
    d.help = "checkpoint slots for block inputs, the first block's input included "
             "(default round(sqrt(L)))";
    return {d};
  }

  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    const int L = ctx.blocks;
    long long s = ctx.params.has("snapshots")
                      ? ctx.params.get_int("snapshots")
                      : std::max(1LL, std::llround(std::sqrt(static_cast<double>(L))));
    if (s < 1) throw remat::Error("snapshots must be at least 1, got " + std::to_string(s));
    const int slots = static_cast<int>(std::min<long long>(s, L));  // more than L are never used
    remat::Schedule out;
    out.blocks = L;
    out.params = "snapshots=" + std::to_string(s);
    out.checkpoint_slots = slots;
    const std::uint64_t forwards =
        static_cast<std::uint64_t>(L) + remat::revolve::min_advances(static_cast<std::uint64_t>(L),
                                                                     static_cast<std::uint64_t>(slots));
    constexpr std::uint64_t kMaxActions = 50'000'000;
    if (forwards + static_cast<std::uint64_t>(L) > kMaxActions)
      throw remat::Error(std::to_string(L) + " blocks with " + std::to_string(slots) +
                         " snapshots need " + std::to_string(forwards) +
                         " block forwards; use more snapshots");
    remat::revolve::plan(L, slots, out);
    return out;
  }
};

}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(RevolvePolicy)
