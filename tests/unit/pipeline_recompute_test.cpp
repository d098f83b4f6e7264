// What a pipeline stage holds under recomputation: each micro-batch waiting for its backward
// holds what its blocks saved in the forward sweep (never a block recomputed ahead of it), the
// plan's outline adds up to its walk, and the paper's 530B and 1T first stages hold Table 2's
// bytes per block per micro-batch in flight (Korthikanti et al. 2022, Figure 7).
#include <gtest/gtest.h>

#include <string>

#include "core/engine/rank_prediction.h"
#include "core/engine/simulator.h"
#include "core/graph/parallel_layout.h"
#include "core/model/model_source.h"
#include "policy_test_util.h"

namespace remat {
namespace {

using u64 = std::uint64_t;

StagePlanner planner(const std::string& policy) {
  return [policy](const BlockGraph& g) { return test::plugins().plan(parse_policy_choice(policy), g); };
}

ParallelLayout layout(int tp, bool sp, int pp) {
  ParallelLayout p;
  p.tp = tp;
  p.sp = sp;
  p.pp = pp;
  return p;
}

// Every stage of the paper's setups: the walk of the whole 1F1B step agrees with the plan (walked
// short and extrapolated), the outline adds up, and the blocks of a waiting micro-batch hold
// Table 2's bytes.
void expect_paper_stages(const char* preset, int pp, const std::string& policy, Strategy table2) {
  SCOPED_TRACE(std::string(preset) + " " + policy);
  const ModelConfig m = resolve_model(preset);
  const ParallelLayout p = layout(8, true, pp);
  const RankPrediction r = predict_ranks(m, p, planner(policy), nullptr);
  const u64 per_block = layer_activation_bytes(per_rank_graph(m, p, 0), table2);
  ASSERT_EQ(r.micro_batch.size(), 1u);
  const MicroBatchPrediction& mb = r.micro_batch[0];
  EXPECT_EQ(mb.held_bytes, static_cast<u64>(mb.blocks) * per_block);
  for (u64 b : mb.sim.saved_bytes_per_block) EXPECT_EQ(b, per_block);
  for (int i : {0, 1, pp / 2, pp - 1}) {
    SCOPED_TRACE("stage " + std::to_string(i));
    const StagePrediction& st = r.stages[static_cast<std::size_t>(i)];
    const Prediction w = simulate_stage(m, p, i, mb.schedule, nullptr);
    EXPECT_EQ(st.peak_bytes, w.peak_bytes);
    EXPECT_EQ(st.activation_bytes, w.activation_peak_bytes);
    EXPECT_EQ(st.held_bytes, w.held_after_forward_bytes);
    // A micro-batch's blocks hold one micro-batch's bytes, whatever waits beside them.
    EXPECT_EQ(w.saved_bytes_per_block, mb.sim.saved_bytes_per_block);
    EXPECT_GE(st.held_bytes, mb.held_bytes);
    // What a waiting micro-batch keeps outside its blocks (the first stage's embedding dropout
    // mask, the rank's s/T of it) is small next to them. (The last stage's one micro-batch also
    // holds its output for the head.)
    if (st.in_flight > 1) EXPECT_LE(st.held_bytes - mb.held_bytes, mb.held_bytes / 4);
    EXPECT_EQ((st.in_flight - 1) * st.held_bytes + st.working_set_bytes(), st.activation_bytes);
  }
  // The first stage against Figure 7's row: its in-flight micro-batches x blocks x Table 2,
  // plus what they keep outside the blocks, with one micro-batch's blocks traded for its working set.
  const StagePrediction& first = r.stages[0];
  const u64 figure7 = static_cast<u64>(first.in_flight) * mb.held_bytes;
  EXPECT_EQ(first.activation_bytes + mb.held_bytes,
            figure7 + (first.in_flight - 1) * (first.held_bytes - mb.held_bytes) + first.working_set_bytes());
  EXPECT_LT(first.working_set_bytes(), 2 * mb.held_bytes + (u64{1} << 30));
  if (table2 == Strategy::Selective) {  // Figure 7's "+ sequence parallel + selective" row
    const StrategyRow row = paper_strategies(m, p)[3];
    EXPECT_EQ(row.first_stage_bytes, figure7);
    const u64 gap = first.activation_bytes > figure7 ? first.activation_bytes - figure7 : figure7 - first.activation_bytes;
    EXPECT_LE(gap, first.working_set_bytes());
  }
}

TEST(PipelineRecompute, SelectiveHoldsTable2PerBlockOnEveryStage) {
  expect_paper_stages("megatron-530b", 35, "selective:modules=core_attn", Strategy::Selective);
  expect_paper_stages("megatron-1t", 64, "selective", Strategy::Selective);
}

TEST(PipelineRecompute, FullRecomputationHoldsOnlyBlockInputs) {
  expect_paper_stages("megatron-530b", 35, "uniform:layers=1", Strategy::Full);
  expect_paper_stages("megatron-1t", 64, "block", Strategy::Full);
}

TEST(PipelineRecompute, EveryPolicyMeasuresOneMicroBatchPerBlock) {
  // saved_bytes_per_block means one micro-batch's bytes on a stage for every policy, as in one
  // process: 4 micro-batches in flight on the first stage change nothing.
  ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive, 4);
  ParallelLayout p = layout(1, false, 2);
  p.micro_batches = 4;
  m.batch = 1;
  for (const char* policy : {"none", "selective", "uniform:segments=2", "uniform:layers=1", "block:layers=1"}) {
    SCOPED_TRACE(policy);
    const RankPrediction r = predict_ranks(m, p, planner(policy), nullptr);
    const MicroBatchPrediction& mb = r.micro_batch[0];
    for (int i = 0; i < 2; ++i) {
      const Prediction w = simulate_stage(m, p, i, mb.schedule, nullptr);
      EXPECT_EQ(w.saved_bytes_per_block, mb.sim.saved_bytes_per_block) << "stage " << i;
    }
  }
}

}  // namespace
}  // namespace remat
