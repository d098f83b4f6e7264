// A run of several ranks as one Chrome trace, on a real tensor-parallel run (tests/data/ranks-v3):
// each collective linked to the same one on its partner (a pipeline's sends to the next stage's
// receives), a rank missing or from another job named with what differs, and the trace with a
// process per rank, flows between partners and the optimizer phase.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/analysis/collective_links.h"
#include "core/analysis/rank_check.h"
#include "core/trace/chrome_trace.h"
#include "core/trace/ranks_dir.h"
#include "test_files.h"

namespace fs = std::filesystem;

namespace remat {
namespace {

const fs::path kRanksRun = fs::path(REMAT_TEST_DATA_DIR) / "ranks-v3";

std::vector<Trace> read_rank_traces(const RanksDir& r) {
  std::vector<Trace> out;
  for (int k = 0; k < r.world_size; ++k) out.push_back(read_rank_run(kRanksRun.string(), r, k));
  return out;
}

std::vector<const Trace*> trace_pointers(const std::vector<Trace>& v) {
  std::vector<const Trace*> p;
  for (const auto& t : v) p.push_back(&t);
  return p;
}

TEST(CollectiveLinks, EachCollectiveOfOneRankIsLinkedToTheSameOneOnItsPartner) {
  const RanksDir r = read_ranks_json(kRanksRun.string());
  const auto traces = read_rank_traces(r);
  const auto ranks = trace_pointers(traces);
  const CollectiveLinks l = collective_links(ranks);
  std::size_t comm0 = 0;
  for (const auto& o : traces[0].ops) comm0 += o.stream == Stream::Comm;
  ASSERT_GT(comm0, 0u);
  EXPECT_EQ(l.links.size(), comm0);
  EXPECT_EQ(l.unmatched, 0u);
  EXPECT_EQ(l.flows.size(), comm0);  // one partner each
  for (const CollectiveLink& k : l.links) {
    ASSERT_EQ(k.members.size(), 2u);
    const OpRecord& a = traces[0].ops[k.members[0].op];
    const OpRecord& b = traces[1].ops[k.members[1].op];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.op, b.op);
    EXPECT_EQ(a.ranks, b.ranks);
    // The one the other waited for is the one that came last.
    const auto& last = k.members[k.last];
    const auto& other = k.members[1 - k.last];
    EXPECT_GE(traces[static_cast<std::size_t>(last.rank)].ops[last.op].start_ns - traces[static_cast<std::size_t>(last.rank)].step_start_ns,
              traces[static_cast<std::size_t>(other.rank)].ops[other.op].start_ns - traces[static_cast<std::size_t>(other.rank)].step_start_ns);
  }
  for (std::size_t i = 1; i < l.flows.size(); ++i)
    EXPECT_LE(std::min(l.flows[i - 1].from_ns, l.flows[i - 1].to_ns), std::min(l.flows[i].from_ns, l.flows[i].to_ns));
  // Every op links back to its exchange.
  for (std::size_t k = 0; k < l.links.size(); ++k)
    for (const FlowEnd& m : l.links[k].members) EXPECT_EQ(l.link_of(m.rank, m.op), static_cast<std::int64_t>(k));
  // A window of time holds the flows that cross it.
  const Flow& f = l.flows[l.flows.size() / 2];
  const auto in = l.flows_in(f.from_ns, f.from_ns);
  EXPECT_NE(std::find(in.begin(), in.end(), &f), in.end());
  // Rank 1 missing: nothing is linked to a wrong op.
  const CollectiveLinks alone = collective_links({ranks[0], nullptr});
  EXPECT_TRUE(alone.links.empty());
  EXPECT_EQ(alone.unmatched, comm0);
}

TEST(CollectiveLinks, PipelineSendsPairWithTheReceivesOfTheNextStage) {
  auto op = [](std::int64_t s, std::int64_t e, const char* name, const char* kind, std::vector<std::int32_t> g) {
    OpRecord o;
    o.start_ns = s;
    o.end_ns = e;
    o.stream = Stream::Comm;
    o.name = name;
    o.op = kind;
    o.ranks = std::move(g);
    return o;
  };
  Trace s0, s1, s2;
  for (int i = 0; i < 2; ++i) {
    s0.ops.push_back(op(10 + 100 * i, 20 + 100 * i, "pp.activation.send", "send", {0, 1, 2}));
    s1.ops.push_back(op(5 + 100 * i, 30 + 100 * i, "pp.activation.recv", "recv", {0, 1, 2}));
    s1.ops.push_back(op(40 + 100 * i, 50 + 100 * i, "pp.activation.send", "send", {0, 1, 2}));
    s2.ops.push_back(op(35 + 100 * i, 60 + 100 * i, "pp.activation.recv", "recv", {0, 1, 2}));
  }
  const CollectiveLinks l = collective_links({&s0, &s1, &s2});
  EXPECT_EQ(l.unmatched, 0u);
  ASSERT_EQ(l.flows.size(), 4u);
  for (const Flow& f : l.flows) {
    EXPECT_EQ(f.to.rank, f.from.rank + 1);  // down the pipeline
    const Trace* from = f.from.rank == 0 ? &s0 : &s1;
    EXPECT_EQ(from->ops[f.from.op].op, "send");
    EXPECT_LE(f.from_ns, f.to_ns);
  }
}


TEST(RankCheck, ARankMissingOrFromAnotherJobIsNamedWithWhatDiffers) {
  const RanksDir r = read_ranks_json(kRanksRun.string());
  const auto traces = read_rank_traces(r);
  EXPECT_TRUE(check_ranks(r, trace_pointers(traces)).empty()) << describe(check_ranks(r, trace_pointers(traces)));

  const auto missing = check_ranks(r, {&traces[0], nullptr});
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_TRUE(missing[0].missing);
  EXPECT_EQ(missing[0].rank, 1);
  EXPECT_NE(missing[0].what.find("rank 1 of 2 is missing"), std::string::npos) << missing[0].what;

  // rank-1 replaced by another job's rank 1: its figures are not those ranks.json recorded.
  Trace foreign = traces[1];
  foreign.step_stats.back().time_ms += 3.5;
  auto other = check_ranks(r, {&traces[0], &foreign});
  ASSERT_EQ(other.size(), 1u);
  EXPECT_FALSE(other[0].missing);
  EXPECT_NE(other[0].what.find("rank-1/ is not rank 1 of this run"), std::string::npos) << other[0].what;
  EXPECT_NE(other[0].what.find("median step"), std::string::npos) << other[0].what;
  // ... or rank 0's directory in rank 1's place.
  other = check_ranks(r, {&traces[0], &traces[0]});
  ASSERT_EQ(other.size(), 1u);
  EXPECT_NE(other[0].what.find("tp rank 0 (this run's is 1)"), std::string::npos) << other[0].what;
  // ... or a run of another model.
  Trace model = traces[1];
  model.model.hidden *= 2;
  other = check_ranks(r, {&traces[0], &model});
  ASSERT_EQ(other.size(), 1u);
  EXPECT_NE(other[0].what.find("model"), std::string::npos) << other[0].what;
  EXPECT_EQ(rank_title(r, 1), "rank 1 (tp rank 1, dp rank 0)");
}

TEST(RanksChromeTrace, OneProcessPerRankWithFlowsBetweenPartnersAndTheOptimizerPhase) {
  const RanksDir r = read_ranks_json(kRanksRun.string());
  const auto traces = read_rank_traces(r);
  testing::TempDir d;
  const std::string path = (d.path() / "trace.json").string();
  write_ranks_chrome_trace({{&traces[0], rank_title(r, 0)}, {&traces[1], rank_title(r, 1)}}, path);
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::map<int, std::size_t> ops_per_pid;
  std::set<std::string> names;
  std::map<std::uint64_t, int> flow_ends;
  std::set<std::string> phases;
  for (const auto& e : j["traceEvents"]) {
    const int pid = e["pid"].get<int>();
    if (e["ph"] == "M" && e["name"] == "process_name") names.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X" && e.contains("args") && e["args"].contains("op_id")) ++ops_per_pid[pid];
    if (e["ph"] == "X" && e.value("cat", "") == "phase") phases.insert(e["name"].get<std::string>());
    if (e["ph"] == "s" || e["ph"] == "f") flow_ends[e["id"].get<std::uint64_t>()] += e["ph"] == "s" ? 1 : 10;
    if (e.contains("ts")) EXPECT_GE(e["ts"].get<double>(), 0.0) << e.dump();
  }
  EXPECT_EQ(ops_per_pid[1], traces[0].ops.size());
  EXPECT_EQ(ops_per_pid[2], traces[1].ops.size());
  EXPECT_TRUE(names.count("rank 0 (tp rank 0, dp rank 0)"));
  EXPECT_TRUE(names.count("rank 1 (tp rank 1, dp rank 0)"));
  const CollectiveLinks l = collective_links(trace_pointers(traces));
  EXPECT_EQ(flow_ends.size(), l.flows.size());
  for (const auto& [id, ends] : flow_ends) EXPECT_EQ(ends, 11) << id;  // one start, one finish
  EXPECT_TRUE(phases.count("optimizer"));
  EXPECT_TRUE(phases.count("backward"));
}


}  // namespace
}  // namespace remat
