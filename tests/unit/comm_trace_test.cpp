// Collectives on their own stream (format version 3): the comm stream and the ranks column read
// and written back, refused where they do not belong, tagged by the profiler with their group;
// a directory of several ranks read as one rank with its layout, and related to a single
// process of the same global model.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/analysis/run_compare.h"
#include "core/analysis/run_layout.h"
#include "core/profiler/host_profiler.h"
#include "core/trace/ranks_dir.h"
#include "core/trace/run_dir.h"
#include "core/util/error.h"
#include "trace_test_util.h"

namespace fs = std::filesystem;

namespace remat {
namespace {

using testing::read_error;
using testing::slurp;
using testing::spit;
using testing::TempDir;

const fs::path kRanks = fs::path(REMAT_TEST_DATA_DIR) / "ranks-v3";

// A copy of `from` under `d` with `edit` applied to its text file `file`.
std::string edited_copy(const TempDir& d, const fs::path& from, const std::string& name, const std::string& file,
                        const std::function<std::string(std::string)>& edit) {
  const fs::path to = d.path() / name;
  fs::copy(from, to, fs::copy_options::recursive);
  spit((to / file).string(), edit(slurp((to / file).string())));
  return to.string();
}

std::string replace_first(std::string s, const std::string& a, const std::string& b) {
  const auto at = s.find(a);
  EXPECT_NE(at, std::string::npos) << a;
  if (at != std::string::npos) s.replace(at, a.size(), b);
  return s;
}

TEST(CommTrace, CollectivesOfARankAreOnTheCommStreamWithTheirGroup) {
  const Trace t = read_run_dir((kRanks / "rank-1").string());
  std::size_t comm = 0;
  for (const auto& o : t.ops) {
    const bool collective = o.op == "all_gather" || o.op == "reduce_scatter" || o.op == "all_reduce";
    EXPECT_EQ(o.stream == Stream::Comm, collective) << o.name;
    if (o.stream != Stream::Comm) {
      EXPECT_TRUE(o.ranks.empty()) << o.name;
      continue;
    }
    ++comm;
    EXPECT_EQ(o.ranks, (std::vector<std::int32_t>{0, 1})) << o.name;  // the tensor-parallel group of 2
    EXPECT_GT(o.bytes, 0u) << o.name;
    EXPECT_GT(o.end_ns, o.start_ns) << o.name;
  }
  EXPECT_GE(comm, 4u * static_cast<std::size_t>(t.model.layers));  // sp: 2 gathers, 2 scatters per block forward
  // ... and written back byte for byte, with the version's header.
  TempDir d;
  write_csv_tables(t, d.path().string());
  EXPECT_EQ(slurp(d / "ops.csv"), slurp((kRanks / "rank-1" / "ops.csv").string()));
}

TEST(CommTrace, TheCommStreamAndRanksAreRefusedWhereTheyDoNotBelong) {
  TempDir d;
  const fs::path v2 = fs::path(REMAT_TEST_DATA_DIR) / "run-v2";
  // Version 2 has no comm stream.
  std::string dir = edited_copy(d, v2, "v2comm", "ops.csv", [](std::string s) {
    return replace_first(s, ",compute,", ",comm,");
  });
  EXPECT_NE(read_error(dir).find("ops.csv line 2, column 'stream': unknown stream 'comm' (one of: compute, copy_d2h, copy_h2d, host)"),
            std::string::npos)
      << read_error(dir);
  // Ranks on an op that is not a collective.
  const fs::path r1 = kRanks / "rank-1";
  dir = edited_copy(d, r1, "computeranks", "ops.csv", [](std::string s) {
    const auto line = s.find('\n') + 1;
    const auto end = s.find('\n', line);
    s.insert(end, "0 1");  // the first op (compute) gets ranks
    return s;
  });
  EXPECT_NE(read_error(dir).find("column 'ranks': '0 1' on an op of stream compute (only collectives, stream comm, have ranks)"),
            std::string::npos)
      << read_error(dir);
  for (const std::string bad : {"1 0", "0  1", "0 x", "-1", "0 1 "}) {
    dir = edited_copy(d, r1, "bad" + std::to_string(std::hash<std::string>()(bad)), "ops.csv",
                      [&](std::string s) { return replace_first(s, ",0 1\n", "," + bad + "\n"); });
    const std::string e = read_error(dir);
    EXPECT_NE(e.find("column 'ranks': '" + bad + "'"), std::string::npos) << e;
  }
}

TEST(CommTrace, RanksParseAndPrint) {
  std::vector<std::int32_t> r;
  std::string why;
  EXPECT_TRUE(parse_ranks("", r, why));
  EXPECT_TRUE(r.empty());
  EXPECT_TRUE(parse_ranks("0 2 4", r, why));
  EXPECT_EQ(r, (std::vector<std::int32_t>{0, 2, 4}));
  EXPECT_EQ(ranks_text(r), "0 2 4");
  EXPECT_FALSE(parse_ranks("2 2", r, why));
  EXPECT_NE(why.find("ascending"), std::string::npos);
  EXPECT_FALSE(parse_ranks("1048576", r, why));
  EXPECT_NE(why.find("more than 1048575"), std::string::npos);
  EXPECT_FALSE(parse_ranks("+1", r, why));
}

TEST(CommTrace, LayoutGroupsNameTheGlobalRanks) {
  // Rank 5 of tp 2 x dp 3: tp_rank 1, dp_rank 2.
  NullCommunicator dp(2, 3), tp(1, 2);
  const auto g = layout_groups(&dp, &tp);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].comm, &dp);
  EXPECT_EQ(g[0].ranks, (std::vector<std::int32_t>{1, 3, 5}));
  EXPECT_EQ(g[1].comm, &tp);
  EXPECT_EQ(g[1].ranks, (std::vector<std::int32_t>{4, 5}));
  EXPECT_TRUE(layout_groups(nullptr, nullptr).empty());
}

TEST(CommTrace, TheProfilerGivesACollectiveTheRanksOfTheGroupItCalled) {
  SteadyClock clock;
  HostProfiler p(clock);
  NullCommunicator dp(0, 2), tp(1, 2);
  p.set_comm_groups(layout_groups(&dp, &tp));
  float x[4] = {};
  auto run = [&](Stream s, Communicator* c) {
    OpInfo op;
    op.name = "x";
    op.stream = s;
    p.begin_op(op);
    if (c) c->all_reduce_sum(x, 4, "x");
    p.end_op(op);
  };
  run(Stream::Comm, &tp);
  run(Stream::Comm, &dp);
  run(Stream::Compute, nullptr);
  run(Stream::Comm, nullptr);  // called no communicator: no group known
  const auto r = p.collect();
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].ranks, (std::vector<std::int32_t>{0, 1}));  // tp group of dp_rank 0
  EXPECT_EQ(r[1].ranks, (std::vector<std::int32_t>{1, 3}));  // dp group of tp_rank 1
  EXPECT_TRUE(r[2].ranks.empty());
  EXPECT_TRUE(r[3].ranks.empty());
}

TEST(RanksDir, ReadsTheLayoutAndEachRankWithIt) {
  const RanksDir r = read_ranks_json(kRanks.string());
  EXPECT_TRUE(is_ranks_dir(kRanks.string()));
  EXPECT_FALSE(is_ranks_dir((kRanks / "rank-0").string()));
  EXPECT_EQ(r.world_size, 2);
  EXPECT_EQ(r.tp, 2);
  EXPECT_EQ(r.dp, 1);
  EXPECT_TRUE(r.sp);
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[1].tp_rank, 1);
  EXPECT_GT(r.ranks[1].peak_bytes, 0u);
  const int p = peak_rank(r);
  ASSERT_GE(p, 0);
  for (const auto& row : r.ranks) EXPECT_LE(row.peak_bytes, r.ranks[static_cast<std::size_t>(p)].peak_bytes);
  EXPECT_EQ(compared_rank(r, std::nullopt, "x"), p);
  EXPECT_EQ(compared_rank(r, 1, "x"), 1);
  EXPECT_THROW(compared_rank(r, 2, "x"), Error);

  const Trace t = read_rank_run(kRanks.string(), r, 1);
  EXPECT_EQ(t.peak_bytes, r.ranks[1].peak_bytes);
  const RunLayout l = run_layout(t);
  EXPECT_EQ(l.tp, 2);
  EXPECT_TRUE(l.sp);
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(layout_label(l), "tp 2 sp");
  EXPECT_EQ(rank_label(l), "tp 2 sp, rank 1");
  // On its own (no sp in its provenance) the layout is read from its collectives.
  const RunLayout alone = run_layout(read_run_dir((kRanks / "rank-1").string()));
  EXPECT_TRUE(alone.sp);
  EXPECT_EQ(alone.rank, 1);
}

TEST(RunLayout, ReadsDistributedCheckpointsFromTheProvenance) {
  Trace t;
  t.provenance = {{"tp_world_size", "2"}, {"tp_rank", "1"}, {"sp", "0"}, {"distribute_saved_activations", "1"}};
  const RunLayout l = run_layout(t);
  EXPECT_TRUE(l.distributed_checkpoints);
  EXPECT_EQ(layout_label(l), "tp 2 distributed ckpt");
  EXPECT_EQ(rank_label(l), "tp 2 distributed ckpt, rank 1");
  t.provenance.back().second = "0";
  EXPECT_EQ(layout_label(run_layout(t)), "tp 2");
}

TEST(RanksDir, ABadRanksJsonIsRefusedByField) {
  TempDir d;
  auto err = [](const std::string& dir) {
    try {
      read_ranks_json(dir);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string dir = edited_copy(d, kRanks, "world", "ranks.json",
                                [](std::string s) { return replace_first(s, "\"world_size\": 2", "\"world_size\": 3"); });
  EXPECT_NE(err(dir).find("world_size 3 is not tp 2 × dp 1"), std::string::npos) << err(dir);
  dir = edited_copy(d, kRanks, "tprank", "ranks.json",
                    [](std::string s) { return replace_first(s, "\"tp_rank\": 1", "\"tp_rank\": 2"); });
  EXPECT_NE(err(dir).find("ranks[1]: field 'tp_rank' must be an integer 0..1, got 2"), std::string::npos) << err(dir);
  dir = edited_copy(d, kRanks, "newer", "ranks.json",
                    [](std::string s) { return replace_first(s, "\"format_version\": 1", "\"format_version\": 7"); });
  EXPECT_NE(err(dir).find("format version 7 is newer than this RematLab reads (1)"), std::string::npos) << err(dir);
  const RanksDir r = read_ranks_json(kRanks.string());
  fs::remove_all(d.path() / "newer" / "rank-1");
  try {
    read_rank_run((d.path() / "newer").string(), r, 1);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 of 2 left no run directory"), std::string::npos) << e.what();
  }
}

TEST(RunLayout, ADistributedRankSharesTheBaselineOfItsGlobalModel) {
  Trace one;
  one.model.batch = 4;
  one.policy = "none";
  one.device = "cpu";
  one.peak_bytes = 1000;
  one.step_stats.push_back({0, true, 1.0, 10.0, 1000, 0, 0, 1});
  Trace dp = one;  // a data-parallel rank: half the batch, its own gradients
  dp.model.batch = 2;
  dp.peak_bytes = 600;
  dp.provenance = {{"dp_rank", "1"}, {"dp_world_size", "2"}, {"tp_rank", "0"}, {"tp_world_size", "1"}};
  Trace other = one;  // another global batch
  other.model.batch = 2;
  EXPECT_EQ(global_model(dp).batch, 4);
  EXPECT_EQ(rank_label(run_layout(dp)), "dp 2, rank 1");
  const auto rel = relate_runs({&one, &dp, &other});
  EXPECT_EQ(rel[1].baseline, 0);
  ASSERT_TRUE(rel[1].peak_reduction_pct);
  EXPECT_DOUBLE_EQ(*rel[1].peak_reduction_pct, 40.0);
  EXPECT_FALSE(rel[1].grads_match_none);  // a rank's gradients are not the single process's
  EXPECT_EQ(rel[2].baseline, 2);           // batch 2 of its own: its own baseline
  ASSERT_TRUE(rel[0].grads_match_none);
}

}  // namespace
}  // namespace remat
