// Checkpoint plans of a recorded PyTorch step (core/analysis/recorded_plan.h): the plan syntax,
// the blocks each plan checkpoints, and the prediction on a hand-made recording (storages
// counted once, parameters left out, the inputs a checkpoint keeps, FLOPs known or not), and
// selective plans (the kept ops' outputs inside the regions, the other ops' FLOPs).
#include <gtest/gtest.h>

#include <filesystem>

#include "core/analysis/recorded_plan.h"
#include "core/util/error.h"
#include "test_files.h"

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
  EXPECT_EQ(parse_checkpoint_plan("none").kind, CheckpointPlanSpec::Kind::None);
  for (const char* bad : {"every:0", "every:", "every:x", "segments:-1", "sqrt:2", "modules:", "none:2", ""})
    EXPECT_THROW(parse_checkpoint_plan(bad), Error) << bad;
}

TEST(RecordedPlan, ParsesSelectivePlans) {
  auto p = parse_checkpoint_plan("selective:keep=matmul");
  EXPECT_EQ(p.kind, CheckpointPlanSpec::Kind::PerBlock);
  EXPECT_EQ(p.keep, (std::vector<std::string>{"matmul"}));
  EXPECT_EQ(p.text, "selective:keep=matmul");
  p = parse_checkpoint_plan("selective:keep=matmul,sdpa@modules:h.*,x");
  EXPECT_EQ(p.kind, CheckpointPlanSpec::Kind::Modules);
  EXPECT_EQ(p.keep, (std::vector<std::string>{"matmul", "sdpa"}));
  EXPECT_EQ(p.globs, (std::vector<std::string>{"h.*", "x"}));
  EXPECT_EQ(p.text, "selective:keep=matmul,sdpa@modules:h.*,x");
  p = parse_checkpoint_plan("selective:keep=conv@segments:2");
  EXPECT_EQ(p.kind, CheckpointPlanSpec::Kind::Segments);
  EXPECT_EQ(p.k, 2);
  EXPECT_TRUE(parse_checkpoint_plan("segments:2").keep.empty());
  for (const char* bad : {"selective", "selective:", "selective:matmul", "selective:keep=", "selective:keep=matmul,",
                          "selective:keep=,matmul", "selective:keep=Mat-Mul", "selective:keep=matmul@",
                          "selective:keep=matmul@every:0", "selective:keep=matmul@selective:keep=sdpa",
                          "selective:keep=matmul@bogus", "selectivekeep=matmul", "selective:keep=matmul@none"})
    EXPECT_THROW(parse_checkpoint_plan(bad), Error) << bad;
  try {
    parse_checkpoint_plan("selective:keep=matmul@every:0");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'selective:keep=matmul@every:0': every:K"), std::string::npos) << e.what();
  }
}

TEST(RecordedPlan, RegionsOfEachBlockPlan) {
  EXPECT_EQ(plan_regions(parse_checkpoint_plan("per-block"), 3), (Regions{{0, 0}, {1, 1}, {2, 2}}));
  EXPECT_EQ(plan_regions(parse_checkpoint_plan("every:2"), 5), (Regions{{0, 0}, {2, 2}, {4, 4}}));
  // K segments, as uniform:segments=K: lengths within one of each other, the longer first.
  EXPECT_EQ(plan_regions(parse_checkpoint_plan("segments:2"), 5), (Regions{{0, 2}, {3, 4}}));
  EXPECT_EQ(plan_regions(parse_checkpoint_plan("segments:3"), 5), (Regions{{0, 1}, {2, 3}, {4, 4}}));
  EXPECT_EQ(plan_regions(parse_checkpoint_plan("segments:5"), 5), (Regions{{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}}));
  EXPECT_THROW(plan_regions(parse_checkpoint_plan("segments:6"), 5), Error);
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

TEST(RecordedPlan, NoneIsTheStepAsRecorded) {
  const RecordedRun r = two_blocks();
  EXPECT_TRUE(plan_regions(parse_checkpoint_plan("none"), 2).empty());
  const auto p = predict_recorded_plan(r, parse_checkpoint_plan("none"));
  EXPECT_EQ(p.saved_bytes, p.recorded_saved_bytes);
  EXPECT_EQ(p.saved_bytes_per_block, (std::vector<std::uint64_t>{110, 110}));
  EXPECT_TRUE(p.checkpointed.empty());
  ASSERT_TRUE(p.recompute_flops.has_value());
  EXPECT_EQ(*p.recompute_flops, 0u);
  EXPECT_EQ(p.recomputed_blocks, 0u);
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

// two_blocks() with op outputs: classes matmul (aten::linear, aten::mm) and conv (aten::conv2d).
// Block b: h.b.mlp's linear makes storage 70+b (300 bytes); h.b's mm makes storage 10+b (the
// one h.b.mlp saves; 11 the head holds too); h.b's conv2d makes storage 90+b (77 bytes); the
// head's linear makes storage 30 (which it saves). Forward ops: per block linear (200 FLOPs),
// gelu (0) in h.b.mlp, add (5) in h.b; the head's linear (999).
RecordedRun with_outputs() {
  RecordedRun r = two_blocks();
  r.has_op_outputs = true;
  r.op_classes = {{"matmul", {"aten::linear", "aten::mm"}}, {"conv", {"aten::conv2d"}}};
  auto o = [&r](std::string op, std::string module, int block, std::uint64_t storage, std::uint64_t bytes) {
    r.outputs.push_back(RecordedOutput{std::move(op), std::move(module), block, storage, bytes});
  };
  auto f = [&r](std::string name, std::string module, std::uint64_t flops) {
    r.forward_ops.push_back(RecordedOp{std::move(name), std::move(module), flops});
  };
  for (int b = 0; b < 2; ++b) {
    const std::string p = "h." + std::to_string(b);
    const auto u = static_cast<std::uint64_t>(b);
    o("aten::linear", p + ".mlp", b, 70 + u, 300);
    o("aten::mm", p, b, 10 + u, 100);
    o("aten::conv2d", p, b, 90 + u, 77);
    f("aten::linear", p + ".mlp", 200);
    f("aten::gelu", p + ".mlp", 0);
    f("aten::add", p, 5);
  }
  o("aten::linear", "head", -1, 30, 1000);
  f("aten::linear", "head", 999);
  return r;
}

TEST(RecordedPlan, SelectiveSavesTheKeptOutputsInsideEachBlock) {
  const auto p = predict_recorded_plan(with_outputs(), parse_checkpoint_plan("selective:keep=matmul"));
  // per-block's 1000 + 100 + 2 * 7, then the linears' 2 * 300 and the mm's storage 10 (100);
  // storage 11 is held by the head already.
  EXPECT_EQ(p.saved_bytes, 1000u + 100 + 2 * 7 + 2 * 300 + 100);
  EXPECT_EQ(p.kept_output_bytes, 700u);
  EXPECT_EQ(p.saved_bytes_per_block, (std::vector<std::uint64_t>{7 + 300 + 100, 7 + 300}));
  // Recomputed: gelu and add of each block; the linears are kept, the head's is outside.
  ASSERT_TRUE(p.recompute_flops.has_value());
  EXPECT_EQ(*p.recompute_flops, 10u);
  EXPECT_EQ(p.recomputed_ops, 4u);
  EXPECT_EQ(p.recomputed_ops_without_flops, 2u);
  const auto q = predict_recorded_plan(with_outputs(), parse_checkpoint_plan("selective:keep=matmul,conv"));
  EXPECT_EQ(q.saved_bytes, p.saved_bytes + 2 * 77);
  EXPECT_EQ(*q.recompute_flops, 10u);
}

TEST(RecordedPlan, SelectiveOverModulesKeepsOnlyInsideThem) {
  const auto p = predict_recorded_plan(with_outputs(), parse_checkpoint_plan("selective:keep=matmul@modules:h.*.mlp"));
  // modules:h.*.mlp's 1000 + 100 + 2 * 10, then the mlps' linear outputs; the mm of h.b is
  // outside the regions (its storage 10+b is saved anyway).
  EXPECT_EQ(p.checkpointed, (std::vector<std::string>{"h.0.mlp", "h.1.mlp"}));
  EXPECT_EQ(p.saved_bytes, 1000u + 100 + 2 * 10 + 2 * 300);
  EXPECT_EQ(*p.recompute_flops, 0u);
  EXPECT_EQ(p.recomputed_ops, 2u);
  EXPECT_EQ(p.recomputed_ops_without_flops, 2u);
}

TEST(RecordedPlan, SelectiveRefusesUnknownClassesAndOldRecordings) {
  try {
    predict_recorded_plan(with_outputs(), parse_checkpoint_plan("selective:keep=matmul,attention"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown op class 'attention' (op classes: matmul, conv)"), std::string::npos)
        << e.what();
  }
  try {
    predict_recorded_plan(two_blocks(), parse_checkpoint_plan("selective:keep=matmul"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("predates selective plans"), std::string::npos) << e.what();
  }
  // A plain plan of a recording with op outputs is as before: they are not counted.
  EXPECT_EQ(predict_recorded_plan(with_outputs(), parse_checkpoint_plan("per-block")).saved_bytes, 1000u + 100 + 2 * 7);
}

TEST(RecordedPlan, NamesItCouldNotPrintOrWriteAreRefusedWithTheirPlace) {
  // The GUI's recording; module names go into plan --from-run's text and JSON output.
  remat::testing::TempDir d;
  std::filesystem::copy(std::string(REMAT_SOURCE_DIR) + "/tests/gui/data/recorded-gpt2", d / "rec");
  EXPECT_EQ(read_recorded_run(d / "rec").blocks, 2);
  const std::string calls = remat::testing::slurp(d / "rec/module_calls.csv");
  const auto at = calls.find(",wte,");
  ASSERT_NE(at, std::string::npos);
  for (const auto& [bad, why] : {std::pair<std::string, std::string>{std::string("w\0e", 3), "holds a NUL byte at offset 1"},
                                 {"w\xfe" "e", "is not valid UTF-8 (byte 0xfe at offset 1)"}}) {
    std::string c = calls;
    c.replace(at + 1, 3, bad);
    remat::testing::spit(d / "rec/module_calls.csv", c);
    try {
      read_recorded_run(d / "rec");
      FAIL() << why;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("module_calls.csv line 3, column 'module'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace remat
