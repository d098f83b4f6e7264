// The "all ranks" view's data (core/analysis/rank_lanes.h) on the committed run of two ranks,
// and the grouping of runs for the Compare page: a rank with runs of its own layout, an imported
// trace alone, named by its file.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/analysis/rank_lanes.h"
#include "core/analysis/run_groups.h"
#include "core/trace/ranks_dir.h"
#include "core/trace/run_dir.h"

namespace fs = std::filesystem;

namespace remat {
namespace {

const fs::path kRanks = fs::path(REMAT_TEST_DATA_DIR) / "ranks-v3";

TEST(RankLanes, EachRankIsALaneOfItsOpsAndItsCollectivesFromItsStepStart) {
  const RanksDir r = read_ranks_json(kRanks.string());
  std::vector<Trace> traces;
  for (int k = 0; k < r.world_size; ++k) traces.push_back(read_rank_run(kRanks.string(), r, k));
  std::vector<const Trace*> ranks;
  for (const auto& t : traces) ranks.push_back(&t);
  ranks.push_back(nullptr);  // a rank that left no run
  const RankLanes l = rank_lanes(ranks);
  ASSERT_EQ(l.rows.rows(), 6u);
  ASSERT_EQ(l.lanes.size(), 6u);
  std::int64_t longest = 1;
  for (std::size_t k = 0; k < traces.size(); ++k) {
    const Trace& t = traces[k];
    longest = std::max(longest, t.step_end_ns - t.step_start_ns);
    const auto& ops = l.rows.row(2 * k);
    const auto& comm = l.rows.row(2 * k + 1);
    EXPECT_EQ(l.lanes[2 * k].rank, static_cast<int>(k));
    EXPECT_EQ(l.lanes[2 * k + 1].stream, Stream::Comm);
    EXPECT_EQ(ops.size() + comm.size(), t.ops.size());
    EXPECT_FALSE(comm.empty());
    for (const Span& s : comm) {
      const OpRecord* o = lane_op(l, ranks, 2 * k + 1, s.index);
      ASSERT_NE(o, nullptr);
      EXPECT_EQ(o->stream, Stream::Comm);
      EXPECT_EQ(s.color, kCommColor);
      EXPECT_EQ(s.start, o->start_ns - t.step_start_ns);  // time 0: the rank's step start
      EXPECT_EQ(s.end, o->end_ns - t.step_start_ns);
      EXPECT_GE(s.start, 0);
    }
    for (const Span& s : ops) {
      const OpRecord* o = lane_op(l, ranks, 2 * k, s.index);
      ASSERT_NE(o, nullptr);
      EXPECT_NE(o->stream, Stream::Comm);
      EXPECT_EQ(s.color, static_cast<std::uint8_t>(o->phase));
    }
    for (std::size_t i = 1; i < comm.size(); ++i) EXPECT_LE(comm[i - 1].start, comm[i].start);
  }
  EXPECT_TRUE(l.rows.row(4).empty());
  EXPECT_TRUE(l.rows.row(5).empty());
  EXPECT_EQ(lane_op(l, ranks, 4, 0), nullptr);
  EXPECT_GE(l.duration, longest);

  const auto peaks = rank_peaks(ranks);
  ASSERT_EQ(peaks.size(), 3u);
  for (std::size_t k = 0; k < traces.size(); ++k) {
    EXPECT_EQ(peaks[k].measured, r.ranks[k].peak_bytes);
    EXPECT_EQ(peaks[k].predicted, r.ranks[k].predicted_peak_bytes);
    EXPECT_TRUE(peaks[k].complete);
  }
  EXPECT_FALSE(peaks[2].complete);
  EXPECT_EQ(peaks[2].measured, 0u);
}

TEST(RankLanes, ARankGroupsWithRunsOfItsLayoutNotWithTheSingleProcess) {
  Trace one;
  one.model.batch = 4;
  one.device = "cpu";
  Trace rank = one;
  rank.model.batch = 2;
  rank.provenance = {{"dp_world_size", "2"}, {"dp_rank", "0"}};
  Trace rank1 = rank;
  rank1.provenance = {{"dp_world_size", "2"}, {"dp_rank", "1"}};
  Trace tp = one;
  tp.provenance = {{"tp_world_size", "2"}, {"tp_rank", "0"}, {"sp", "1"}};
  Trace other = rank;
  other.provenance.clear();  // batch 2 in one process: another model
  // A rank's memory is sharded: set against one process's it would read as a reduction.
  const auto g = group_runs({&one, &rank, &other, &rank1, &tp});
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g[0].members, (std::vector<std::size_t>{0}));
  EXPECT_EQ(g[1].members, (std::vector<std::size_t>{1, 3}));
  EXPECT_EQ(g[2].members, (std::vector<std::size_t>{2}));
  EXPECT_EQ(g[3].members, (std::vector<std::size_t>{4}));
  EXPECT_NE(group_label(rank).find(" b4 "), std::string::npos) << group_label(rank);
  EXPECT_NE(group_label(rank).find("· dp 2"), std::string::npos) << group_label(rank);
  EXPECT_NE(group_label(tp).find("· tp 2 sp"), std::string::npos) << group_label(tp);
  EXPECT_EQ(group_label(one).find("·"), std::string::npos) << group_label(one);
}

TEST(RankLanes, AnImportedTraceIsItsOwnGroupNamedByItsFile) {
  Trace a;
  a.source = "pytorch-snapshot";
  a.model.seq = 32;
  a.model.batch = 2;
  a.provenance = {{"imported_from", "snap.pickle"}};
  Trace b = a;
  b.provenance = {{"imported_from", "other.pickle"}};
  Trace own;
  own.model = a.model;
  const auto g = group_runs({&a, &b, &own});
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].label, "snap.pickle (pytorch-snapshot)");
  EXPECT_EQ(g[0].label.find("s32"), std::string::npos);  // no model it never had
}

}  // namespace
}  // namespace remat
