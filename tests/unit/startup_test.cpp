// Start-up: where the time before the first step goes (Trace::startup_breakdown_ms).
#include <gtest/gtest.h>

#include <vector>

#include "core/schedule/schedule.h"
#include "core/trace/summary.h"
#include "engine_test_util.h"

namespace remat {
namespace {

TEST(StartUp, TheBreakdownNamesTheRunsPartsAndAddsUpToTheStartUp) {
  ModelConfig m = testing::small_model(Family::Gpt2, AttentionImpl::Naive, 0.0);
  Trace t = testing::train(m, store_all_schedule(m.layers), 1, 3, false, 1);
  ASSERT_TRUE(t.complete) << t.error;
  const std::vector<std::string> want = {"simulate", "corpus", "memory", "weights", "executor", "batch"};
  ASSERT_EQ(t.startup_breakdown_ms.size(), want.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(t.startup_breakdown_ms[i].first, want[i]);
    EXPECT_GE(t.startup_breakdown_ms[i].second, 0.0) << want[i];
    sum += t.startup_breakdown_ms[i].second;
  }
  EXPECT_NEAR(sum, t.startup_ms, 1e-6 * t.startup_ms + 1e-9);
  const nlohmann::json j = summary_json(t);
  ASSERT_TRUE(j.contains("startup_breakdown_ms"));
  for (const auto& [part, ms] : t.startup_breakdown_ms)
    EXPECT_DOUBLE_EQ(j["startup_breakdown_ms"][part].get<double>(), ms) << part;
  EXPECT_FALSE(summary_json(Trace{}).contains("startup_breakdown_ms"));
}

}  // namespace
}  // namespace remat
