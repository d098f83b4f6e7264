// Checkpoint plans of a recorded PyTorch step (core/analysis/recorded_plan.h): the plan syntax,
// the blocks each plan checkpoints, and the prediction on a hand-made recording (storages
// counted once, parameters left out, the inputs a checkpoint keeps, FLOPs known or not).
#include <gtest/gtest.h>

#include "core/analysis/recorded_plan.h"
#include "core/util/error.h"

namespace remat {
namespace {

using Regions = std::vector<std::pair<int, int>>;

TEST(RecordedPlan, ParsesEachPlanAndRefusesTheRest) {
  EXPECT_EQ(parse_checkpoint_plan("per-block").kind, CheckpointPlanSpec::Kind::PerBlock);
  EXPECT_EQ(parse_checkpoint_plan("sqrt").kind, CheckpointPlanSpec::Kind::Sqrt);
  EXPECT_EQ(parse_checkpoint_plan("every:3").k, 3);
  EXPECT_EQ(parse_checkpoint_plan("segments:2").kind, CheckpointPlanSpec::Kind::Segments);
  auto m = parse_checkpoint_plan("modules:h.*.mlp,,h.0.attn");
  EXPECT_EQ(m.globs, (std::vector<std::string>{"h.*.mlp", "h.0.attn"}));
  for (const char* bad : {"every:0", "every:", "every:x", "segments:-1", "sqrt:2", "modules:", "none", ""})
    EXPECT_THROW(parse_checkpoint_plan(bad), Error) << bad;
}

TEST(RecordedPlan, RegionsOfEachBlockPlan) {
  EXPECT_EQ(plan_regions(parse_checkpoint_plan("per-block"), 3), (Regions{{0, 0}, {1, 1}, {2, 2}}));
  EXPECT_EQ(plan_regions(parse_checkpoint_plan("every:2"), 5), (Regions{{0, 0}, {2, 2}, {4, 4}}));
  EXPECT_EQ(plan_regions(parse_checkpoint_plan("segments:2"), 5), (Regions{{0, 1}, {2, 3}, {4, 4}}));
  // ceil(sqrt(N)) blocks a segment
  EXPECT_EQ(plan_regions(parse_checkpoint_plan("sqrt"), 4), (Regions{{0, 1}, {2, 3}}));
  EXPECT_EQ(plan_regions(parse_checkpoint_plan("sqrt"), 5), (Regions{{0, 2}, {3, 4}}));
  EXPECT_TRUE(plan_regions(parse_checkpoint_plan("modules:x"), 4).empty());
}

// Two blocks under "h": block b saves storage 10+b (100 bytes) in h.b.mlp and 20+b (10 bytes) in
// h.b; the head saves storage 30 (1000 bytes); storage 11 is also held by the head (an alias);
// storage 5 is a parameter. Block b's call takes storage 40+b (7 bytes).
RecordedRun two_blocks() {
  RecordedRun r;
  r.blocks = 2;
  r.blocks_module = "h";
  r.flops_known = true;
  auto t = [&r](std::string module, int block, std::uint64_t storage, std::uint64_t bytes, bool param = false,
                bool held = true) {
    RecordedTensor x;
    x.module = std::move(module);
    x.block = block;
    x.storage = storage;
    x.storage_bytes = bytes;
    x.parameter = param;
    x.held_at_backward = held;
    r.tensors.push_back(x);
  };
  for (int b = 0; b < 2; ++b) {
    const std::string p = "h." + std::to_string(b);
    t(p + ".mlp", b, 10 + b, 100);
    t(p, b, 20 + b, 10);
    t(p + ".mlp", b, 5, 4000, true);
    t(p, b, 60 + b, 50, false, false);  // released before backward: never counted
  }
  t("head", -1, 30, 1000);
  t("head", -1, 11, 100);
  auto c = [&r](std::string module, int block, std::optional<std::uint64_t> flops,
                std::vector<std::pair<std::uint64_t, std::uint64_t>> in, bool forward = true) {
    RecordedCall x;
    x.module = std::move(module);
    x.block = block;
    x.forward = forward;
    x.flops = flops;
    x.inputs = std::move(in);
    r.calls.push_back(x);
  };
  c("", -1, 999, {{1, 8}});
  for (int b = 0; b < 2; ++b) {
    const std::string p = "h." + std::to_string(b);
    c(p, b, 300, {{40u + static_cast<unsigned>(b), 7}});
    c(p + ".mlp", b, 200, {{20u + static_cast<unsigned>(b), 10}});
  }
  c("h.1", 1, 300, {{99, 1234}}, false);  // a recompute call: not a forward
  return r;
}

TEST(RecordedPlan, PerBlockKeepsInputsAndWhatOthersHold) {
  const RecordedRun r = two_blocks();
  const auto p = predict_recorded_plan(r, parse_checkpoint_plan("per-block"));
  EXPECT_EQ(p.recorded_saved_bytes, 2u * 100 + 2 * 10 + 1000);
  // Kept: the head's 30 and its alias of 11, and each block's input (7 bytes).
  EXPECT_EQ(p.saved_bytes, 1000u + 100 + 2 * 7);
  EXPECT_EQ(p.saved_bytes_per_block, (std::vector<std::uint64_t>{7, 7}));
  EXPECT_EQ(p.checkpointed, (std::vector<std::string>{"h.0", "h.1"}));
  ASSERT_TRUE(p.recompute_flops.has_value());
  EXPECT_EQ(*p.recompute_flops, 600u);
  EXPECT_EQ(p.recomputed_blocks, 2u);
}

TEST(RecordedPlan, SegmentsKeepTheFirstInputOnly) {
  const auto p = predict_recorded_plan(two_blocks(), parse_checkpoint_plan("sqrt"));  // one segment of 2
  EXPECT_EQ(p.saved_bytes, 1000u + 100 + 7);
  EXPECT_EQ(*p.recompute_flops, 600u);
}

TEST(RecordedPlan, ModulesDropOnlyWhatTheyHold) {
  const auto p = predict_recorded_plan(two_blocks(), parse_checkpoint_plan("modules:h.*.mlp"));
  // The mlps' 10 and 11 go (11 stays: the head holds it); their inputs (20, 21) were kept anyway.
  EXPECT_EQ(p.saved_bytes, 1000u + 100 + 2 * 10);
  EXPECT_EQ(*p.recompute_flops, 400u);
  // The outermost match wins: h.* takes the blocks, not their mlps.
  const auto q = predict_recorded_plan(two_blocks(), parse_checkpoint_plan("modules:h.*"));
  EXPECT_EQ(q.checkpointed, (std::vector<std::string>{"h.0", "h.1"}));
  EXPECT_THROW(predict_recorded_plan(two_blocks(), parse_checkpoint_plan("modules:nope")), Error);
}

TEST(RecordedPlan, UnknownFlopsAndNoBlocks) {
  RecordedRun r = two_blocks();
  r.calls[1].flops.reset();
  EXPECT_FALSE(predict_recorded_plan(r, parse_checkpoint_plan("per-block")).recompute_flops.has_value());
  r = two_blocks();
  r.flops_known = false;
  EXPECT_FALSE(predict_recorded_plan(r, parse_checkpoint_plan("per-block")).recompute_flops.has_value());
  r.blocks = 0;
  EXPECT_THROW(predict_recorded_plan(r, parse_checkpoint_plan("per-block")), Error);
}

TEST(RecordedPlan, NothingSavedPredictsNothing) {
  RecordedRun r = two_blocks();
  r.tensors.clear();
  EXPECT_EQ(predict_recorded_plan(r, parse_checkpoint_plan("per-block")).saved_bytes, 0u);
}

}  // namespace
}  // namespace remat
