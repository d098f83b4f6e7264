// plan predicts a pipeline stage from a short walk (rank_prediction.cpp, StageWalker): a few
// micro-batches past the warm-up, and for long warm-ups the bytes each micro-batch in flight adds.
// Here every stage of many layouts is predicted both ways, the short walk against the step's whole
// walk (simulate_stage), to the byte: GPT-2 (tied) and Llama (untied), ZeRO 0 to 3, tensor
// parallelism, pipelines of 2 to 12 stages with as many micro-batches as stages and more.
#include <gtest/gtest.h>

#include "core/backend/null/cuda_target.h"
#include "core/engine/rank_prediction.h"
#include "core/engine/simulator.h"
#include "core/schedule/schedule.h"
#include "policy_test_util.h"

namespace remat {
namespace {

struct Case {
  Family family;
  int layers, pp, micro_batches, tp, dp, zero;
  const char* policy;
};

TEST(PlanScaling, AShortWalkPredictsEveryStageAsTheWholeStepDoes) {
  const Case cases[] = {
      {Family::Gpt2, 12, 12, 12, 1, 1, 0, "none"},        // warm-ups of 0 to 11: extrapolated past 4
      {Family::Gpt2, 12, 12, 17, 1, 1, 0, "uniform:segments=1"},
      {Family::Gpt2, 12, 12, 13, 1, 2, 3, "none"},        // two pairs after the first stage's warm-up
      {Family::Llama, 12, 12, 12, 1, 2, 2, "none"},       // one pair: the warm-up takes all but one
      {Family::Llama, 12, 6, 11, 1, 2, 2, "none"},        // ZeRO-2's buckets, an untied head
      {Family::Gpt2, 12, 6, 6, 1, 2, 3, "none"},          // ZeRO-3's gathers
      {Family::Gpt2, 12, 4, 9, 2, 2, 1, "none"},          // tensor parallel, ZeRO-1
      {Family::Llama, 12, 3, 8, 2, 1, 0, "uniform:segments=2"},
      {Family::Gpt2, 12, 2, 7, 1, 1, 0, "none"},
  };
  for (const Case& c : cases) {
    ModelConfig m = test::tiny(c.family, AttentionImpl::Naive, c.layers);
    m.batch = 1;
    if (c.family == Family::Llama) m.tied_embeddings = false;
    ParallelLayout p;
    p.pp = c.pp;
    p.micro_batches = c.micro_batches;
    p.tp = c.tp;
    p.dp = c.dp;
    p.zero = c.zero;
    const auto plan = [&](const BlockGraph& g) { return test::plugins().plan(parse_policy_choice(c.policy), g); };
    // For a CUDA target also its caching allocator's reserved bytes, extrapolated as the peak is.
    const CudaTarget cuda;
    for (const Backend* mirror : {static_cast<const Backend*>(nullptr), static_cast<const Backend*>(&cuda)}) {
      const RankPrediction r = predict_ranks(m, p, plan, mirror);
      ASSERT_EQ(r.stages.size(), static_cast<std::size_t>(c.pp));
      for (const StagePrediction& s : r.stages) {
        const Schedule& sched = r.micro_batch[static_cast<std::size_t>(s.micro_batch)].schedule;
        const Prediction whole = simulate_stage(m, p, s.stage, sched, mirror);
        const std::string what = std::string(to_string(c.family)) + " pp " + std::to_string(c.pp) + " x " +
                                 std::to_string(c.micro_batches) + " tp " + std::to_string(c.tp) + " zero " +
                                 std::to_string(c.zero) + " " + c.policy + ", stage " + std::to_string(s.stage) +
                                 (mirror ? " on cuda" : "");
        EXPECT_EQ(s.peak_bytes, whole.peak_bytes) << what;
        EXPECT_EQ(s.activation_bytes, whole.activation_peak_bytes) << what;
        EXPECT_EQ(s.reserved_bytes, whole.reserved_bytes) << what;
        EXPECT_EQ(s.rounded_peak_bytes, whole.rounded_peak_bytes) << what;
        if (mirror) EXPECT_GE(s.reserved_bytes, s.peak_bytes) << what;
      }
    }
  }
}

TEST(PlanScaling, ThousandsOfMicroBatchesAndHundredsOfStagesArePredictedFromShortWalks) {
  // The figures of a layout too long to walk whole in a test: the stages repeat the bytes per
  // micro-batch in flight that the short walks measure, so the first stage's peak is the last
  // middle stage's plus (in flight − 1) of those.
  ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive, 256);
  m.batch = 1;
  ParallelLayout p;
  p.pp = 256;
  p.micro_batches = 4096;
  const auto plan = [](const BlockGraph& g) { return store_all_schedule(g.config().layers); };
  const RankPrediction r = predict_ranks(m, p, plan, nullptr);
  ASSERT_EQ(r.stages.size(), 256u);
  const std::uint64_t step = r.stages[1].peak_bytes - r.stages[2].peak_bytes;
  EXPECT_GT(step, 0u);
  for (int i = 2; i + 2 < 256; ++i)
    EXPECT_EQ(r.stages[static_cast<std::size_t>(i)].peak_bytes - r.stages[static_cast<std::size_t>(i + 1)].peak_bytes,
              step)
        << "stage " << i;
  EXPECT_EQ(r.peak_stage, 0);
}

}  // namespace
}  // namespace remat
