// Grouping runs for the compare view (model and device), the spread over counted steps, the
// "within noise" rule for overheads, and the frontier kept within a model and device.
#include <gtest/gtest.h>

#include "core/analysis/run_compare.h"
#include "core/analysis/run_groups.h"
#include "core/model/model_source.h"

namespace remat {
namespace {

Trace run_of(const char* model, const char* policy, std::uint64_t peak, std::vector<double> ms) {
  Trace t;
  t.model = resolve_model(model);
  t.device = "cpu";
  t.policy = policy;
  t.peak_bytes = peak;
  for (double m : ms) {
    StepStats s;
    s.time_ms = m;
    s.peak_bytes = peak;
    t.step_stats.push_back(s);
  }
  return t;
}

TEST(RunGroups, TwoModelsFormTwoGroupsAndIncompleteRunsNone) {
  Trace a = run_of("small", "none", 1000, {10}), b = run_of("tiny", "none", 10, {1}),
        c = run_of("small", "uniform", 600, {12}), d = run_of("small", "selective", 800, {11});
  d.complete = false;
  d.status = "cancelled";
  const auto g = group_runs({&a, &b, &c, &d});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].members, (std::vector<std::size_t>{0, 2}));
  EXPECT_EQ(g[1].members, (std::vector<std::size_t>{1}));
  EXPECT_EQ(g[0].label, "small s" + std::to_string(a.model.seq) + " b" + std::to_string(a.model.batch) + " " +
                            to_string(a.model.dtype) + " cpu");
  EXPECT_EQ(groups_banner(g), "2 groups: " + g[0].label + " (2 runs), " + g[1].label +
                                  " (1 run); each has its own scales and frontier");
  EXPECT_EQ(groups_banner({g[0]}), "");
  // The same model on another device, or with another batch, is another group.
  Trace e = a, f = a;
  e.device = "cuda";
  f.model.batch += 1;
  EXPECT_EQ(group_runs({&a, &e, &f}).size(), 3u);
}

TEST(RunGroups, TheFrontierIsTakenWithinAModelAndDevice) {
  // A tiny run is smaller and faster than every small run: it must not push them off.
  Trace none = run_of("small", "none", 1000, {10}), uni = run_of("small", "uniform", 600, {13}),
        tiny = run_of("tiny", "none", 10, {1});
  const auto rel = relate_runs({&none, &uni, &tiny});
  EXPECT_TRUE(rel[0].frontier);
  EXPECT_TRUE(rel[1].frontier);
  EXPECT_TRUE(rel[2].frontier);
}

TEST(RunGroups, SpreadOverTheCountedSteps) {
  Trace t = run_of("tiny", "none", 10, {12, 10, 30});
  StepStats warm;
  warm.counted = false;
  warm.time_ms = 500;
  warm.peak_bytes = 99;
  t.step_stats.insert(t.step_stats.begin(), warm);
  t.step_stats[2].peak_bytes = 7;
  const StepSpread s = step_time_spread(t);
  EXPECT_EQ(s.steps, 3);
  EXPECT_DOUBLE_EQ(s.median, 12);
  EXPECT_DOUBLE_EQ(s.min, 10);
  EXPECT_DOUBLE_EQ(s.max, 30);
  const StepSpread p = step_peak_spread(t);
  EXPECT_DOUBLE_EQ(p.min, 7);
  EXPECT_DOUBLE_EQ(p.max, 10);
}

TEST(RunGroups, AnOverheadSmallerThanItsSpreadIsWithinNoise) {
  const StepSpread base = step_time_spread(run_of("tiny", "none", 10, {10, 12}));  // median 11
  // +1.4 %-ish overhead with 4 ms of spread between the two runs: noise.
  const auto noisy = step_overhead(step_time_spread(run_of("tiny", "uniform", 9, {9.2, 13.1})), base);
  ASSERT_TRUE(noisy);
  EXPECT_NEAR(noisy->pct, 100.0 * (11.15 / 11.0 - 1.0), 1e-9);
  EXPECT_NEAR(noisy->spread_pct, 100.0 * (3.9 + 2.0) / 11.0, 1e-9);
  EXPECT_TRUE(noisy->spread_known);
  EXPECT_TRUE(noisy->within_noise);
  // +58 % with tight steps: measured.
  const auto real = step_overhead(step_time_spread(run_of("tiny", "selective", 9, {17.3, 17.5})), base);
  ASSERT_TRUE(real);
  EXPECT_NEAR(real->pct, 100.0 * (17.4 / 11.0 - 1.0), 1e-9);
  EXPECT_FALSE(real->within_noise);
  // One counted step: no spread to judge by.
  const auto one = step_overhead(step_time_spread(run_of("tiny", "selective", 9, {17.4})), base);
  ASSERT_TRUE(one);
  EXPECT_FALSE(one->spread_known);
  EXPECT_TRUE(one->within_noise);
  EXPECT_FALSE(step_overhead(StepSpread{}, base));
}

}  // namespace
}  // namespace remat
