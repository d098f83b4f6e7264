// What recomputation cost, on real runs: `none` against full recomputation. The time per op
// type, kernel and block split by phase (the recompute column summing to the recompute ops);
// the diff of the two runs op by op (the recompute ops added, nothing else, matched by name,
// block and phase); runs that are not alike refused with what differs; a pipeline stage's
// blocks named by the whole model.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/analysis/block_names.h"
#include "core/analysis/op_diff.h"
#include "core/analysis/op_stats.h"
#include "core/trace/csv.h"
#include "engine_test_util.h"
#include "test_files.h"

namespace remat {
namespace {

const Trace& none_run() {
  static const Trace t = [] {
    ModelConfig m = testing::small_model(Family::Gpt2, AttentionImpl::Naive, 0.1);
    Schedule s = store_all_schedule(m.layers);
    s.policy = "none";
    return testing::train(m, s, 1, 5);
  }();
  return t;
}

const Trace& recompute_run() {
  static const Trace t = [] {
    ModelConfig m = testing::small_model(Family::Gpt2, AttentionImpl::Naive, 0.1);
    return testing::train(m, testing::checkpoint_all_schedule(m.layers), 1, 5);
  }();
  return t;
}

TEST(PhaseStats, EachRowSplitsItsTimeByPhaseAndRecomputationIsItsOwnColumn) {
  const Trace& t = recompute_run();
  ASSERT_TRUE(t.complete) << t.error;
  for (OpStatKey key : {OpStatKey::OpType, OpStatKey::Kernel, OpStatKey::Block}) {
    const auto stats = op_stats(t, key);
    std::int64_t recompute = 0, total = 0;
    for (const OpStat& s : stats) {
      std::int64_t sum = 0;
      std::uint64_t n = 0;
      for (std::size_t p = 0; p < s.phase_ns.size(); ++p) {
        sum += s.phase_ns[p];
        n += s.phase_count[p];
      }
      EXPECT_EQ(sum, s.total_ns) << s.key;
      EXPECT_EQ(n, s.count) << s.key;
      recompute += s.recompute_ns();
      total += s.total_ns;
    }
    std::int64_t want = 0, all = 0;
    for (const OpRecord& o : t.ops) {
      const std::int64_t d = std::max<std::int64_t>(0, o.end_ns - o.start_ns);
      all += d;
      if (o.phase == Phase::Recompute) want += d;
    }
    EXPECT_GT(want, 0);
    EXPECT_EQ(recompute, want);
    EXPECT_EQ(total, all);
    EXPECT_EQ(op_stats_total(stats).recompute_ns(), want);
  }
  // Per block: the blocks in order, then the ops outside them; each block recomputed.
  const auto blocks = op_stats(t, OpStatKey::Block);
  ASSERT_EQ(blocks.size(), static_cast<std::size_t>(t.model.layers) + 1);
  for (int b = 0; b < t.model.layers; ++b) {
    EXPECT_EQ(blocks[static_cast<std::size_t>(b)].key, "h" + std::to_string(b));
    EXPECT_GT(blocks[static_cast<std::size_t>(b)].recompute_ns(), 0);
  }
  EXPECT_EQ(blocks.back().key, kOutsideBlocks);
  EXPECT_EQ(blocks.back().recompute_ns(), 0);
  EXPECT_GT(blocks.back().in(Phase::Optimizer), 0);
  // Under `none` nothing is recomputed.
  EXPECT_EQ(op_stats_total(op_stats(none_run(), OpStatKey::OpType)).recompute_ns(), 0);

  testing::TempDir dir;
  const std::string path = (dir.path() / "stats.csv").string();
  write_op_stats_csv(path, blocks, step_length_ns(t));
  csv::Reader r(path);
  const std::size_t key = r.col("key"), rec = r.col("recompute_us"), fwd = r.col("forward_us"),
                    share = r.col("recompute_share_of_step");
  std::size_t row = 0;
  while (r.next()) {
    EXPECT_EQ(r.str(key), blocks[row].key);
    EXPECT_DOUBLE_EQ(r.f64(rec), static_cast<double>(blocks[row].recompute_ns()) / 1e3);
    EXPECT_DOUBLE_EQ(r.f64(fwd), static_cast<double>(blocks[row].in(Phase::Forward)) / 1e3);
    EXPECT_DOUBLE_EQ(r.f64(share), static_cast<double>(blocks[row].recompute_ns()) / static_cast<double>(step_length_ns(t)));
    ++row;
  }
  EXPECT_EQ(row, blocks.size());
}


TEST(OpDiff, FullRecomputationAddsTheRecomputeOpsAndNothingElse) {
  const Trace& a = none_run();
  const Trace& b = recompute_run();
  const OpDiff d = op_diff(a, b);
  std::size_t recompute_ops = 0;
  for (const auto& o : b.ops) recompute_ops += o.phase == Phase::Recompute;
  ASSERT_GT(recompute_ops, 0u);
  EXPECT_EQ(d.added, recompute_ops);
  EXPECT_EQ(d.removed, 0u);
  EXPECT_EQ(d.matched, a.ops.size());
  EXPECT_EQ(d.rows.size(), a.ops.size() + recompute_ops);
  const PhaseDiff& rec = d.phases[static_cast<std::size_t>(Phase::Recompute)];
  EXPECT_EQ(rec.added, recompute_ops);
  EXPECT_EQ(rec.a_ops, 0u);
  std::int64_t added_ns = 0;
  for (const DiffRow& r : d.rows) {
    if (r.status == DiffStatus::Added) {
      EXPECT_EQ(r.phase, Phase::Recompute) << r.name;
      EXPECT_EQ(r.a, -1);
      added_ns += r.b_ns;
    } else {
      ASSERT_GE(r.a, 0);
      ASSERT_GE(r.b, 0);
      const OpRecord& x = a.ops[static_cast<std::size_t>(r.a)];
      const OpRecord& y = b.ops[static_cast<std::size_t>(r.b)];
      EXPECT_EQ(x.name, y.name);
      EXPECT_EQ(x.block, y.block);
      EXPECT_EQ(x.phase, y.phase);
      EXPECT_EQ(r.delta_ns(), (y.end_ns - y.start_ns) - (x.end_ns - x.start_ns));
    }
  }
  EXPECT_EQ(rec.added_ns, added_ns);
  // Op-aligned: the first run's ops keep their order, each recompute op sits after the op
  // before it in the second run (before its block's backward).
  std::int64_t last = -1;
  for (const DiffRow& r : d.rows)
    if (r.a >= 0) {
      EXPECT_GE(r.a_start, last);
      last = r.a_start;
    }
  // The same run against itself: everything matched.
  const OpDiff same = op_diff(b, b);
  EXPECT_EQ(same.added + same.removed, 0u);
  EXPECT_EQ(same.matched, b.ops.size());

  testing::TempDir dir;
  const std::string path = (dir.path() / "diff.csv").string();
  write_op_diff_csv(path, d);
  csv::Reader r(path);
  std::size_t rows = 0, added = 0;
  while (r.next()) {
    ++rows;
    if (r.str(r.col("status")) == "added") {
      ++added;
      EXPECT_EQ(r.str(r.col("phase")), "recompute");
      EXPECT_EQ(r.str(r.col("a_us")), "");
    }
  }
  EXPECT_EQ(rows, d.rows.size());
  EXPECT_EQ(added, d.added);
}

TEST(OpDiff, RunsOfDifferentModelsOrLayoutsAreRefusedWithWhatDiffers) {
  Trace a = none_run();
  Trace b = a;
  b.model.hidden = 128;
  b.model.name = "wider";
  const auto why = diff_refusal(a, b);
  ASSERT_EQ(why.size(), 1u);
  EXPECT_NE(why[0].find("hidden 64 against 128"), std::string::npos) << why[0];
  try {
    op_diff(a, b);
    FAIL() << "different models were diffed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hidden 64 against 128"), std::string::npos) << e.what();
  }
  Trace c = a;
  c.provenance = {{"tp_world_size", "2"}, {"tp_rank", "1"}, {"sp", "1"}};
  const auto layout = diff_refusal(a, c);
  ASSERT_EQ(layout.size(), 1u);
  EXPECT_NE(layout[0].find("1 rank against tp 2 sp, rank 1"), std::string::npos) << layout[0];
  Trace named = a;
  named.model.name = "renamed";
  EXPECT_TRUE(diff_refusal(a, named).empty());  // the name alone does not make another model
  // Another source is said alone: an imported trace's model is a placeholder, never compared.
  Trace imported = a;
  imported.source = "pytorch-profiler";
  imported.model.hidden = 128;
  const auto source = diff_refusal(imported, a);
  ASSERT_EQ(source.size(), 1u);
  EXPECT_EQ(source[0], "source: pytorch-profiler against rematlab");
  Trace imported2 = imported;
  imported2.model.hidden = 256;
  EXPECT_TRUE(diff_refusal(imported, imported2).empty());
}

TEST(BlockNames, APipelineStageNamesItsBlocksByTheWholeModel) {
  Trace t;
  t.model.layers = 4;
  EXPECT_EQ(first_block(t), 0);
  t.provenance = {{"pp_world_size", "2"}, {"pp_rank", "1"}, {"stage_blocks", "2"}};
  EXPECT_EQ(first_block(t), 2);  // the last stage ends at the model's last block
  EXPECT_EQ(held_blocks(t), 2);
  t.provenance.push_back({"stage_first_block", "1"});
  EXPECT_EQ(first_block(t), 1);
  EXPECT_EQ(block_name(2, 1), "h3");
  EXPECT_EQ(global_op_name(2, "h0.attn.qkv"), "h2.attn.qkv");
  EXPECT_EQ(global_op_name(2, "head.logits"), "head.logits");
  EXPECT_EQ(global_op_name(2, "hx.y"), "hx.y");
  EXPECT_EQ(global_op_name(0, "h1.mlp"), "h1.mlp");
}

}  // namespace
}  // namespace remat
