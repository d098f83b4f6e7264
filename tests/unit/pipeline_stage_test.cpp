// Pipeline stages: the 1F1B order of every stage (each micro-batch forward once, then backward
// once, both in order; min(P − p − 1, N) warm-up forwards; min(P − p, N) micro-batches in flight),
// its refusals, and each stage's initial weights: exactly the whole model's initialization at the
// parameters the stage holds (its blocks, the embedding on the first, the final norm and head on
// the last, a tied head's copy of the word embedding), every parameter on some stage.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/engine/pipeline_order.h"
#include "core/engine/pipeline_stage.h"
#include "core/engine/weight_init.h"
#include "core/model/param_layout.h"
#include "core/util/error.h"
#include "policy_test_util.h"

namespace remat {
namespace {

TEST(PipelineOrder, EveryStageRunsEachMicroBatchForwardThenBackwardInOrder) {
  for (int P = 1; P <= 4; ++P)
    for (int N = P; N <= 6; ++N)
      for (int p = 0; p < P; ++p) {
        const auto order = pipeline_order(P, p, N);
        ASSERT_EQ(order.size(), static_cast<std::size_t>(2 * N));
        int next_f = 0, next_b = 0, warm = 0;
        bool seen_backward = false;
        for (const PipelineItem& i : order) {
          if (i.forward) {
            EXPECT_EQ(i.micro, next_f++) << "P " << P << " p " << p << " N " << N;
            if (!seen_backward) ++warm;
          } else {
            EXPECT_EQ(i.micro, next_b++);
            EXPECT_LT(i.micro, next_f) << "a backward before its forward";
            seen_backward = true;
          }
        }
        EXPECT_EQ(next_f, N);
        EXPECT_EQ(next_b, N);
        // The warm-up forwards, and the one forward the steady part starts with.
        EXPECT_EQ(warm, std::min(P - p - 1, N) + (P - p - 1 < N ? 1 : 0)) << "P " << P << " p " << p;
        EXPECT_EQ(in_flight(order), std::min(P - p, N)) << "P " << P << " p " << p << " N " << N;
      }
}

TEST(PipelineOrder, TwoStagesOfThreeMicroBatches) {
  using I = PipelineItem;
  const std::vector<I> first{{true, 0}, {true, 1}, {false, 0}, {true, 2}, {false, 1}, {false, 2}};
  const std::vector<I> last{{true, 0}, {false, 0}, {true, 1}, {false, 1}, {true, 2}, {false, 2}};
  EXPECT_EQ(pipeline_order(2, 0, 3), first);
  EXPECT_EQ(pipeline_order(2, 1, 3), last);
}

TEST(PipelineOrder, BadArgumentsAreErrors) {
  EXPECT_THROW(pipeline_order(0, 0, 1), Error);
  EXPECT_THROW(pipeline_order(2, 2, 4), Error);
  EXPECT_THROW(pipeline_order(2, -1, 4), Error);
  EXPECT_THROW(pipeline_order(2, 0, 0), Error);
}

std::vector<ModelConfig> models() {
  std::vector<ModelConfig> out;
  for (Family f : {Family::Gpt2, Family::Llama}) {
    ModelConfig m = test::tiny(f, AttentionImpl::Naive, 4);
    m.dtype = DType::F32;
    out.push_back(m);
  }
  ModelConfig untied = out[0];
  untied.tied_embeddings = false;
  out.push_back(untied);
  return out;
}

TEST(PipelineStage, EachStageDrawsTheWholeInitializationsValuesOfItsParameters) {
  for (const ModelConfig& m : models())
    for (int P : {2, 4}) {
      ParallelLayout p;
      p.pp = P;
      p.micro_batches = P;
      const ParamLayout G(m);
      std::vector<float> whole(static_cast<std::size_t>(G.total()));
      init_weight_values(G, m.layers, 11, whole.data(), 1);
      std::map<std::string, int> held;  // whole-model parameter name -> stages holding it
      for (int s = 0; s < P; ++s) {
        const StageCut c = stage_cut(m, p, s);
        EXPECT_EQ(c.blocks, m.layers / P);
        EXPECT_EQ(c.first_block, s * m.layers / P);
        const ParamLayout S(stage_rank_model(m, p, s), c.parts);
        const std::vector<float> mine = stage_weight_values(m, p, s, 0, 11, 2);
        ASSERT_EQ(mine.size(), static_cast<std::size_t>(S.total()));
        // The stage's parameters are the whole model's held ones, in the whole model's order.
        std::size_t k = 0;
        for (const ParamSpec& g : G.params()) {
          const bool in_block = g.block >= c.first_block && g.block < c.first_block + c.blocks;
          const bool wte = g.offset == G.wte, wpe = g.offset == G.wpe;
          const bool outside = g.block < 0 && !wte && !wpe;  // the final norm and the head
          const bool mine_here = g.block >= 0 ? in_block
                                 : wte        ? c.parts.embedding || (c.parts.head && G.lm_head < 0)
                                 : wpe        ? c.parts.embedding
                                              : (outside && c.parts.head);
          if (!mine_here) continue;
          ++held[g.name];
          ASSERT_LT(k, S.params().size());
          const ParamSpec& r = S.params()[k++];
          ASSERT_EQ(r.numel(), g.numel()) << g.name;
          for (std::int64_t i = 0; i < g.numel(); ++i)
            ASSERT_EQ(mine[static_cast<std::size_t>(r.offset + i)], whole[static_cast<std::size_t>(g.offset + i)])
                << "stage " << s << " of " << P << ", " << g.name << "[" << i << "]";
        }
        EXPECT_EQ(k, S.params().size()) << "stage " << s << " holds parameters the model lacks";
      }
      for (const ParamSpec& g : G.params()) {
        const int want = (g.offset == G.wte && m.tied_embeddings) ? 2 : 1;  // the head's copy
        EXPECT_EQ(held[g.name], want) << g.name << ", P " << P << ", tied " << m.tied_embeddings;
      }
    }
}

}  // namespace
}  // namespace remat
