// `block`: Megatron-LM's --recompute-method block with --recompute-num-layers N. The first N
// blocks (of the model, or of a pipeline stage: a policy plans the blocks it is given) are each
// recomputed from their own input before their backward; the others keep everything.
//
//   forward b keep=input (b < N) or keep=all      for b = 0..L-1
//   backward b                                    for b = L-1..N
//   recompute b keep=all; backward b              for b = N-1..0
//
// N = L (the default) recomputes every block: Megatron's full recomputation, as uniform:layers=1.
#include <string>

#include "core/plugin/policy.h"
#include "core/util/error.h"

namespace {

class BlockPolicy final : public remat::Policy {
 public:
  std::string name() const override { return "block"; }
  std::string description() const override {
    return "Megatron-LM's block method: recompute the first N blocks each from its input, keep the rest";
  }
  std::vector<remat::ParamDecl> params() const override {
    remat::ParamDecl d;
    d.name = "layers";
    d.type = remat::ParamType::Int;
    d.min = 0;
    d.max = 1e9;
    d.help = "blocks recomputed from their input, from the first (--recompute-num-layers; "
             "default: every block)";
    return {d};
  }

  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    const int L = ctx.blocks;
    const long long n = ctx.params.has("layers") ? ctx.params.get_int("layers") : L;
    if (n < 0 || n > L)
      throw remat::Error("layers must be between 0 and the number of blocks (" + std::to_string(L) +
                         "), got " + std::to_string(n));
    const int N = static_cast<int>(n);
    remat::Schedule s;
    s.blocks = L;
    s.params = "layers=" + std::to_string(N);
    for (int b = 0; b < L; ++b) s.forward(b, b < N ? remat::Keep::input() : remat::Keep::all());
    for (int b = L - 1; b >= 0; --b) {
      if (b < N) s.recompute(b, remat::Keep::all());
      s.backward(b);
    }
    return s;
  }
};

}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(BlockPolicy)
