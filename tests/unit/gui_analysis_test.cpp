// The Qt-free helpers behind the desktop app's views: downsampling that keeps every bucket's
// maximum, merging sub-pixel op bars, the analytic bytes per block, tensors alive at a moment,
// and the relations between runs (overhead against none, the frontier); what is alive at the
// peak, summing to it, on real runs of two policies, the ranks of a tp 2 run and an imported
// torch snapshot.
#include <gtest/gtest.h>

#include <random>

#include "core/analysis/block_formula.h"
#include "core/analysis/downsample.h"
#include "core/analysis/live_tensors.h"
#include "core/analysis/peak_alive.h"
#include "core/analysis/phase_spans.h"
#include "core/analysis/run_compare.h"
#include "core/trace/run_dir.h"
#include "core/trace/torch_snapshot.h"
#include "engine_test_util.h"
#include "core/graph/block_graph.h"

namespace remat {
namespace {

TEST(Downsample, KeepsTheMaximumOfEveryRange) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> d(0, 1000);
  const std::size_t n = 200000;
  std::vector<double> x(n), y(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<double>(i);
    y[i] = d(rng);
  }
  y[123457] = 5000;  // a one-point peak
  for (auto [x0, x1, px] : {std::tuple{0.0, 199999.0, 800}, std::tuple{100000.0, 150000.0, 300},
                            std::tuple{123000.0, 124000.0, 1000}}) {
    auto idx = downsample_indices(x, y, x0, x1, static_cast<std::size_t>(px));
    ASSERT_FALSE(idx.empty());
    EXPECT_LE(idx.size(), 4u * static_cast<std::size_t>(px) + 2);
    EXPECT_TRUE(std::is_sorted(idx.begin(), idx.end()));
    double best = 0, want = 0;
    for (auto i : idx)
      if (x[i] >= x0 && x[i] <= x1) best = std::max(best, y[i]);
    for (std::size_t i = 0; i < n; ++i)
      if (x[i] >= x0 && x[i] <= x1) want = std::max(want, y[i]);
    EXPECT_EQ(best, want);
  }
}

TEST(Downsample, ReturnsEveryPointWhenFewAndTheNeighboursOutside) {
  std::vector<double> x{0, 1, 2, 3, 4, 5}, y{1, 2, 3, 4, 5, 6};
  auto idx = downsample_indices(x, y, 1.5, 3.5, 10);
  EXPECT_EQ(idx, (std::vector<std::size_t>{1, 2, 3, 4}));
  EXPECT_TRUE(downsample_indices({}, {}, 0, 1, 10).empty());
}

TEST(SpanRows, MergesSubPixelSpansAndKeepsWideOnes) {
  std::vector<Span> row;
  for (std::uint32_t i = 0; i < 100000; ++i) row.push_back({i * 10, i * 10 + 8, i, static_cast<std::uint8_t>(i < 50000 ? 1 : 2)});
  SpanRows rows({row});
  auto all = rows.visible(0, 0, 1000000, 1000);  // 100 spans per pixel
  EXPECT_LE(all.size(), 1000u);
  EXPECT_GE(all.size(), 400u);
  EXPECT_EQ(all.front().start, 0);
  EXPECT_EQ(all.back().end, 999998);
  std::uint64_t merged = 0;
  for (const auto& s : all) merged += s.count;
  EXPECT_EQ(merged, 100000u);
  auto close = rows.visible(0, 5000, 5500, 1000);  // 0.5 ns per pixel: every span its own bar
  ASSERT_EQ(close.size(), 51u);
  EXPECT_EQ(close[0].index, 500u);
  EXPECT_EQ(close[0].count, 1u);
  const Span* s = rows.at(0, 12345);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->index, 1234u);
  EXPECT_EQ(rows.at(0, 12349), nullptr);
  EXPECT_NE(rows.at(0, 12349, 2), nullptr);
}

TEST(BlockFormula, KorthikantiForGpt2AndTheExactTableOtherwise) {
  ModelConfig m;
  set_family(m, Family::Gpt2);
  m.hidden = 96;
  m.heads = 6;
  m.kv_heads = 6;
  m.ffn = 384;
  m.seq = 40;
  m.positions = 40;
  m.batch = 3;
  m.dropout = 0.1;
  const std::uint64_t sbh = 40ull * 3 * 96, as2b = 6ull * 40 * 40 * 3;
  BlockFormula f = block_formula(m);
  EXPECT_TRUE(f.closed_form);
  EXPECT_EQ(f.closed_form_bytes, 34 * sbh + 5 * as2b);
  EXPECT_EQ(f.total, f.closed_form_bytes);
  EXPECT_EQ(f.total, BlockGraph(m).saved_bytes());
  m.dropout = 0;
  f = block_formula(m);
  EXPECT_EQ(f.closed_form_bytes, 32 * sbh + 2 * as2b);
  EXPECT_EQ(f.total, f.closed_form_bytes);
  m.attention = AttentionImpl::Flash;
  f = block_formula(m);
  EXPECT_FALSE(f.closed_form);
  EXPECT_EQ(f.total, BlockGraph(m).saved_bytes());
  set_family(m, Family::Llama);
  m.kv_heads = 2;
  f = block_formula(m);
  EXPECT_FALSE(f.closed_form);
  EXPECT_EQ(f.total, BlockGraph(m).saved_bytes());
  std::uint64_t sum = 0;
  for (const auto& t : f.terms) sum += t.bytes;
  EXPECT_EQ(sum, f.total);
}

Trace small_trace() {
  Trace t;
  t.names = {"", "a", "b", "c"};
  auto ev = [&](std::int64_t at, std::int64_t delta, std::uint64_t id, std::uint32_t name) {
    MemoryEvent e;
    e.t_ns = at;
    e.delta = delta;
    e.id = id;
    e.tensor = name;
    e.block = 0;
    t.events.push_back(e);
  };
  ev(0, 100, 1, 1);
  ev(1, 300, 2, 2);
  ev(2, 200, 3, 3);
  ev(3, -300, 2, 2);
  ev(4, -100, 1, 1);
  return t;
}

TEST(LiveTensors, LargestAliveAtAnEvent) {
  Trace t = small_trace();
  LiveTensorIndex idx(t);
  auto at2 = idx.largest_at(2, 2);
  ASSERT_EQ(at2.size(), 2u);
  EXPECT_EQ(idx.label(*at2[0]), "h0.b");
  EXPECT_EQ(idx.label(*at2[1]), "h0.c");
  auto at3 = idx.largest_at(3, 5);
  ASSERT_EQ(at3.size(), 2u);  // b freed at event 3
  EXPECT_EQ(idx.tensor_name(*at3[0]), "c");
  EXPECT_TRUE(idx.largest_at(4, 5).size() == 1u);
}

TEST(PhaseSpans, MergeConsecutiveOpsOfAPhase) {
  Trace t;
  auto op = [&](std::int64_t s, std::int64_t e, Phase p) {
    OpRecord o;
    o.start_ns = s;
    o.end_ns = e;
    o.phase = p;
    t.ops.push_back(o);
  };
  op(0, 10, Phase::Forward);
  op(12, 20, Phase::Forward);
  op(21, 30, Phase::Backward);
  op(30, 35, Phase::Optimizer);
  auto s = phase_spans(t);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].phase, Phase::Forward);
  EXPECT_EQ(s[0].end_ns, 21);
  EXPECT_EQ(s[2].end_ns, 35);
}

TEST(RunCompare, OverheadAgainstNoneAndTheFrontier) {
  auto run = [](const char* policy, std::uint64_t peak, double ms) {
    Trace t;
    t.policy = policy;
    t.peak_bytes = peak;
    StepStats s;
    s.time_ms = ms;
    t.step_stats.push_back(s);
    t.steps = 1;
    t.warmup = 1;
    return t;
  };
  Trace none = run("none", 1000, 10), uni = run("uniform", 600, 13), bad = run("selective", 900, 14);
  auto rel = relate_runs({&uni, &none, &bad});
  EXPECT_EQ(rel[0].baseline, 1);
  EXPECT_NEAR(*rel[0].step_overhead_pct, 30.0, 1e-9);
  EXPECT_NEAR(*rel[0].peak_reduction_pct, 40.0, 1e-9);
  EXPECT_TRUE(rel[0].frontier);
  EXPECT_TRUE(rel[1].frontier);
  EXPECT_FALSE(rel[2].frontier);  // uniform is smaller and faster
  Trace other = none;
  other.model.layers = 7;
  rel = relate_runs({&other, &uni});
  EXPECT_EQ(rel[1].baseline, -1);  // a none run of another model is no baseline
  // One step without a warm-up (a recorded step) is cold: no overhead against it or of it.
  Trace cold = uni;
  cold.warmup = 0;
  rel = relate_runs({&cold, &none});
  EXPECT_TRUE(rel[0].cold);
  EXPECT_FALSE(rel[0].step_overhead_pct.has_value());
  EXPECT_TRUE(rel[0].peak_reduction_pct.has_value());
  cold.policy = "none";  // a cold baseline: no overhead of the runs against it
  rel = relate_runs({&uni, &cold});
  EXPECT_TRUE(rel[0].cold);
  EXPECT_FALSE(rel[0].step_overhead_pct.has_value());
}

// Every tensor alive at the peak: bytes summing to the timeline's peak (the run's measured peak),
// largest first, each alive at that instant and with a reason.
void expect_peak_alive_sums(const Trace& t, const std::string& what) {
  const PeakAlive p = peak_alive(t);
  ASSERT_TRUE(p.found) << what;
  EXPECT_EQ(p.sum_bytes, p.peak_bytes) << what;
  EXPECT_EQ(p.peak_bytes, t.peak_bytes) << what;
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < p.tensors.size(); ++i) {
    const PeakTensor& x = p.tensors[i];
    sum += x.bytes;
    if (i) EXPECT_GE(p.tensors[i - 1].bytes, x.bytes) << what;
    EXPECT_LE(x.alloc_ns, p.t_ns) << what << " " << x.label;
    EXPECT_TRUE(x.free_ns < 0 || x.free_ns >= p.t_ns) << what << " " << x.label;
    EXPECT_FALSE(x.why.empty()) << what << " " << x.label;
    EXPECT_FALSE(x.label.empty()) << what;
  }
  EXPECT_EQ(sum, p.sum_bytes) << what;
}

TEST(PeakAlive, SumsToThePeakUnderEveryKindOfPolicy) {
  const ModelConfig m = testing::small_model(Family::Gpt2, AttentionImpl::Naive, 0.1);
  Schedule none = store_all_schedule(m.layers);
  none.policy = "none";
  const Trace a = testing::train(m, none, 1, 5);
  expect_peak_alive_sums(a, "none");
  const PeakAlive pa = peak_alive(a);
  // Under none the peak holds the weights' state and the saved activations the policy keeps.
  bool weights = false, kept = false;
  for (const PeakTensor& x : pa.tensors) {
    weights = weights || (x.category == Category::Parameters && x.why.find("whole run") != std::string::npos);
    kept = kept || (x.category == Category::SavedActivations && x.block >= 0 &&
                    x.why.find("the policy keeps it") != std::string::npos && x.label.rfind("h", 0) == 0);
  }
  EXPECT_TRUE(weights);
  EXPECT_TRUE(kept);
  EXPECT_FALSE(pa.op.empty());

  const Trace b = testing::train(m, testing::checkpoint_all_schedule(m.layers), 1, 5);
  expect_peak_alive_sums(b, "recompute all");
  // Checkpointing every block: what the policy keeps at the peak is checkpoints and recomputed
  // tensors, fewer bytes than none keeps.
  std::uint64_t saved_a = 0, saved_b = 0;
  for (const PeakTensor& x : pa.tensors) saved_a += x.category == Category::SavedActivations ? x.bytes : 0;
  for (const PeakTensor& x : peak_alive(b).tensors) saved_b += x.category == Category::SavedActivations ? x.bytes : 0;
  EXPECT_LT(saved_b, saved_a);
}

TEST(PeakAlive, SumsToThePeakOfEachRankAndOfAnImportedSnapshot) {
  const std::string ranks = std::string(REMAT_TEST_DATA_DIR) + "/ranks-v3";
  for (const char* r : {"rank-0", "rank-1"}) expect_peak_alive_sums(read_run_dir(ranks + "/" + r), r);
  const Trace s = import_torch_snapshot(std::string(REMAT_TEST_DATA_DIR) + "/torch/snapshot-small.pickle");
  const PeakAlive p = peak_alive(s);
  ASSERT_TRUE(p.found);
  EXPECT_EQ(p.peak_bytes, s.peak_bytes);
  EXPECT_EQ(p.sum_bytes, p.peak_bytes);
  EXPECT_FALSE(p.tensors.empty());
}

}  // namespace
}  // namespace remat
