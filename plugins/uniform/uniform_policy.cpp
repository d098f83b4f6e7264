// `uniform`: Chen et al. 2016 segments. The L blocks are cut into `segments` consecutive
// segments whose lengths differ by at most one (the longer ones first). In the forward sweep a
// recomputed segment keeps only its first block's input (a checkpoint); the last segment keeps
// everything and is not recomputed, as PyTorch's checkpoint_sequential does. Before the
// backward of a recomputed segment, its blocks run forward again from the checkpoint keeping
// everything (the last block by `recompute`, so its output GEMM is not rerun).
// segments = round(sqrt(L)) by default; segments = L is full per-block recomputation.
//
// `layers=N` instead is Megatron-LM's --recompute-method uniform with --recompute-num-layers N:
// chunks of N blocks from the first (the last chunk the rest), every chunk recomputed, the last
// one too. On a pipeline stage that is what lets each micro-batch waiting for its backward hold
// only its checkpoints: layers=1 is Megatron's full recomputation.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/plugin/policy.h"
#include "core/util/error.h"

namespace {

class UniformPolicy final : public remat::Policy {
 public:
  std::string name() const override { return "uniform"; }
  std::string description() const override {
    return "Chen et al. 2016: keep segment-boundary inputs, recompute a segment before its backward";
  }
  std::vector<remat::ParamDecl> params() const override {
    remat::ParamDecl d;
    d.name = "segments";
    d.type = remat::ParamType::Int;
    d.min = 1;
    d.max = 1e9;
    d.help = "number of segments, 1..L (default round(sqrt(L)); L = recompute every block from its input)";
    remat::ParamDecl n;
    n.name = "layers";
    n.type = remat::ParamType::Int;
    n.min = 1;
    n.max = 1e9;
    n.help = "blocks per chunk, every chunk recomputed, the last too (Megatron-LM's "
             "--recompute-method uniform --recompute-num-layers N; 1 = full recomputation)";
    return {d, n};
  }

  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    const int L = ctx.blocks;
    if (ctx.params.has("layers")) {
      if (ctx.params.has("segments"))
        throw remat::Error("give segments (segments of the blocks, the last kept) or layers (chunks of "
                           "that many blocks, each recomputed), not both");
      return chunks(L, ctx.params.get_int("layers"));
    }
    long long k = ctx.params.has("segments")
                      ? ctx.params.get_int("segments")
                      : std::max(1LL, std::llround(std::sqrt(static_cast<double>(L))));
    if (k < 1 || k > L)
      throw remat::Error("segments must be between 1 and the number of blocks (" +
                         std::to_string(L) + "), got " + std::to_string(k));
    // Segment starts: the first L % k segments have one block more.
    std::vector<int> start;
    const int q = L / static_cast<int>(k), r = L % static_cast<int>(k);
    for (int i = 0, b = 0; i <= k; ++i) {
      start.push_back(b);
      b += q + (i < r ? 1 : 0);
    }
    const int last = static_cast<int>(k) - 1;

    remat::Schedule s;
    s.blocks = L;
    s.params = "segments=" + std::to_string(k);
    for (int seg = 0; seg < k; ++seg)
      for (int b = start[seg]; b < start[seg + 1]; ++b) {
        if (seg == last) s.forward(b, remat::Keep::all());
        else s.forward(b, b == start[seg] ? remat::Keep::input() : remat::Keep::none());
      }
    for (int b = L - 1; b >= start[last]; --b) s.backward(b);
    for (int seg = last - 1; seg >= 0; --seg) {
      const int first = start[seg], end = start[seg + 1];
      for (int b = first; b < end - 1; ++b) s.forward(b, remat::Keep::all());
      s.recompute(end - 1, remat::Keep::all());
      for (int b = end - 1; b >= first; --b) s.backward(b);
    }
    return s;
  }

 private:
  static remat::Schedule chunks(int L, long long n) {
    if (n < 1 || n > L)
      throw remat::Error("layers must be between 1 and the number of blocks (" + std::to_string(L) +
                         "), got " + std::to_string(n));
    const int N = static_cast<int>(n);
    remat::Schedule s;
    s.blocks = L;
    s.params = "layers=" + std::to_string(N);
    for (int b = 0; b < L; ++b) s.forward(b, b % N == 0 ? remat::Keep::input() : remat::Keep::none());
    for (int first = (L - 1) / N * N; first >= 0; first -= N) {
      const int end = std::min(first + N, L);
      for (int b = first; b < end - 1; ++b) s.forward(b, remat::Keep::all());
      s.recompute(end - 1, remat::Keep::all());
      for (int b = end - 1; b >= first; --b) s.backward(b);
    }
    return s;
  }
};

}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(UniformPolicy)
