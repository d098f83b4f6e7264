// The Qt-free helpers behind the desktop app's views: downsampling that keeps every bucket's
// maximum, merging sub-pixel op bars, the analytic bytes per block, tensors alive at a moment,
// and the relations between runs (overhead against none, the frontier).
#include <gtest/gtest.h>

#include <random>

#include "core/analysis/block_formula.h"
#include "core/analysis/downsample.h"
#include "core/analysis/live_tensors.h"
#include "core/analysis/phase_spans.h"
#include "core/analysis/run_compare.h"
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
}

}  // namespace
}  // namespace remat
