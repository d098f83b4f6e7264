// The whole model's flat vector and a rank's pieces of it (rank_weights.h): the T tensor-parallel
// ranks' slices put back give the whole vector bit for bit, a rank's pieces taken from a whole
// vector (a file's) are its slices, and a ZeRO-3 rank's are its shard of them.
#include <gtest/gtest.h>

#include <vector>

#include "core/engine/rank_weights.h"
#include "core/engine/tensor_parallel.h"
#include "core/engine/zero_shard.h"
#include "core/model/param_layout.h"
#include "core/util/error.h"
#include "policy_test_util.h"

namespace remat {
namespace {

std::vector<float> init(const ModelConfig& m, std::uint64_t seed) {
  const ParamLayout L(m);
  std::vector<float> v(static_cast<std::size_t>(L.total()));
  init_weight_values(L, m.layers, seed, v.data(), 1);
  // Norm weights are all 1 and biases 0 at init: give every element its own value, so a piece
  // put in the wrong place shows.
  for (std::size_t i = 0; i < v.size(); ++i) v[i] += static_cast<float>(i % 977) * 1e-3f;
  return v;
}

// GPT-2 (biases, fused q|k|v of equal parts, a tied head), Llama (grouped-query attention,
// gate|up), OLMo 2 (QK-norm weights split with the heads) and Qwen3 (per-head QK-norm weights,
// whole on every rank) and GPT-NeoX (q|k|v stored per head, the parallel block), in fp32.
std::vector<ModelConfig> models() {
  std::vector<ModelConfig> out;
  for (Family f : {Family::Gpt2, Family::Llama, Family::Olmo2, Family::Qwen3, Family::GptNeox}) {
    ModelConfig m = test::tiny(f, AttentionImpl::Naive, 2);
    m.dtype = DType::F32;
    if (f != Family::Gpt2 && f != Family::GptNeox) m.kv_heads = 4;  // 4 kv-heads: T = 4 divides them too
    out.push_back(m);
  }
  return out;
}

TEST(RankWeights, TheRanksSlicesPutBackAreTheWholeVector) {
  for (const ModelConfig& m : models())
    for (int T : {2, 4}) {
      const std::vector<float> global = init(m, 3);
      std::vector<std::vector<float>> ranks;
      for (int t = 0; t < T; ++t) ranks.push_back(rank_weight_slices(m, T, t, global));
      EXPECT_EQ(whole_from_rank_slices(m, T, ranks), global) << to_string(m.family) << " T=" << T;
      // Whole parameters come from rank 0: another rank's different copy is not read.
      for (float& v : ranks[1]) v = -1.0f;
      const std::vector<float> mixed = whole_from_rank_slices(m, T, ranks);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < global.size(); ++i) differ += mixed[i] != global[i];
      const std::int64_t rank_numel = ParamLayout(tensor_rank_model(m, T)).total();
      std::int64_t split = 0;  // elements rank 1 holds of split parameters
      const ParamLayout G(m);
      for (const WeightRun& r : rank_weight_runs(m, T, 1))
        if (r.end - r.begin != G.params()[r.param].numel()) split += r.end - r.begin;
      EXPECT_EQ(static_cast<std::int64_t>(differ), split) << to_string(m.family) << " T=" << T;
      EXPECT_LT(split, rank_numel);
    }
}

TEST(RankWeights, ARanksPiecesOfAFileAreItsSlicesAndItsShard) {
  for (const ModelConfig& m : models()) {
    const int T = 2;
    const ParamLayout G(m);
    const std::vector<float> global = init(m, 9);
    for (int t = 0; t < T; ++t) {
      const std::vector<float> mine = rank_weight_slices(m, T, t, global);
      const std::int64_t n = static_cast<std::int64_t>(mine.size());
      EXPECT_EQ(take_runs(G, rank_weight_runs(m, T, t), global, n), mine);
      for (int D : {2, 3}) {
        const ZeroShard z0 = make_zero_shard(3, D, 0, n);
        for (int d = 0; d < D; ++d) {
          ZeroShard z = make_zero_shard(3, D, d, n);
          const std::vector<float> shard =
              take_runs(G, runs_within(rank_weight_runs(m, T, t), z.begin(), z.count()), global, z.shard());
          ASSERT_EQ(static_cast<std::int64_t>(shard.size()), z0.shard());
          for (std::int64_t i = 0; i < z.shard(); ++i)
            EXPECT_EQ(shard[i], i < z.count() ? mine[z.begin() + i] : 0.0f) << "D=" << D << " d=" << d << " i=" << i;
        }
      }
    }
  }
}

TEST(RankWeights, RefusesValuesOfAnotherModel) {
  const ModelConfig m = models()[1];
  const std::vector<float> global = init(m, 1);
  std::vector<std::vector<float>> ranks{rank_weight_slices(m, 2, 0, global)};
  EXPECT_THROW(whole_from_rank_slices(m, 2, ranks), Error);  // one rank's of two
  ranks.push_back(std::vector<float>(3));
  EXPECT_THROW(whole_from_rank_slices(m, 2, ranks), Error);  // a rank of another size
  const ParamLayout G(m);
  EXPECT_THROW(take_runs(G, layout_weight_runs(G), std::vector<float>(5), G.total()), Error);
  EXPECT_THROW(take_runs(G, layout_weight_runs(G), global, G.total() - 1), Error);  // past the buffer
}

}  // namespace
}  // namespace remat
