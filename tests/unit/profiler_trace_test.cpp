// A torch.profiler Chrome trace as a Trace: ops, their phases and the [memory] instants that
// tests/data/torch/make_fixtures.py wrote into profiler-trace.expected.json; refusals.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "core/trace/import_trace.h"
#include "core/trace/profiler_trace.h"
#include "core/trace/run_dir.h"
#include "test_files.h"

namespace remat {
namespace {

using remat::testing::message_of;

std::string fixture(const std::string& name) { return std::string(REMAT_TEST_DATA_DIR) + "/torch/" + name; }

TEST(ProfilerTrace, OpsPhasesAndMemoryMatchWhatTheFixtureWrote) {
  Trace t = import_trace_file(fixture("profiler-trace.json"));
  auto x = nlohmann::json::parse(remat::testing::slurp(fixture("profiler-trace.expected.json")));
  EXPECT_EQ(t.source, x["source"].get<std::string>());
  EXPECT_EQ(t.device, "cuda");
  ASSERT_EQ(t.ops.size(), x["ops"].get<std::size_t>());
  ASSERT_EQ(t.events.size(), x["memory_events"].get<std::size_t>());
  std::size_t baseline = 0;
  for (const auto& e : t.events) baseline += e.step == -1;
  EXPECT_EQ(baseline, x["baseline_events"].get<std::size_t>());
  EXPECT_EQ(t.peak_bytes, x["peak_bytes"].get<std::uint64_t>());
  EXPECT_EQ(t.step_end_ns, x["duration_ns"].get<std::int64_t>());
  std::map<std::string, Phase> phase;
  for (const auto& o : t.ops) phase[o.name] = o.phase;
  for (const auto& [name, want] : x["phases"].items()) {
    ASSERT_TRUE(phase.count(name)) << name;
    EXPECT_STREQ(to_string(phase[name]), want.get<std::string>().c_str()) << name;
  }
  // Ops in time order; a kernel on the compute stream, the copy on copy_d2h, CPU ops on host.
  for (std::size_t i = 1; i < t.ops.size(); ++i) EXPECT_LE(t.ops[i - 1].start_ns, t.ops[i].start_ns);
  for (const auto& o : t.ops) {
    if (o.op == "kernel") EXPECT_EQ(o.stream, Stream::Compute);
    if (o.op == "gpu_memcpy") EXPECT_EQ(o.stream, Stream::CopyToHost);
    if (o.op == "cpu_op") EXPECT_EQ(o.stream, Stream::Host);
  }
  // A memory event is named after the op it happened in.
  bool in_mm = false;
  for (const auto& e : t.events) in_mm = in_mm || t.names[e.tensor] == "aten::mm";
  EXPECT_TRUE(in_mm);
}

TEST(ProfilerTrace, BecomesARunDirectoryThatReadsBack) {
  remat::testing::TempDir d;
  Trace t = import_trace_file(fixture("profiler-trace.json"));
  write_run_dir(t, d / "run", false);
  Trace back = read_run_dir(d / "run");
  EXPECT_EQ(back.source, "pytorch-profiler");
  EXPECT_EQ(back.ops.size(), t.ops.size());
  EXPECT_EQ(back.events.size(), t.events.size());
}

TEST(ProfilerTrace, RefusesJsonThatIsNoProfilerTrace) {
  std::string m = message_of([] { import_trace_file(fixture("not-a-profiler-trace.json")); });
  EXPECT_NE(m.find("not a torch.profiler trace (no 'traceEvents' array)"), std::string::npos) << m;
  m = message_of([] { trace_from_profiler_json(nlohmann::json::parse(R"({"traceEvents": [{"ph": "X", "cat": "v8", "name": "x", "ts": 1, "dur": 2}]})"), "t.json"); });
  EXPECT_NE(m.find("no cpu_op, kernel"), std::string::npos) << m;
  m = message_of([] { trace_from_profiler_json(nlohmann::json::parse(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "x", "ts": 1}]})"), "t.json"); });
  EXPECT_NE(m.find("has no 'dur'"), std::string::npos) << m;
  m = message_of([] { trace_from_profiler_json(nlohmann::json::parse(R"({"displayTimeUnit": "ns", "otherData": {"format": "rematlab-chrome-trace"}, "traceEvents": []})"), "t.json"); });
  EXPECT_NE(m.find("a RematLab trace.json"), std::string::npos) << m;
  m = message_of([] { trace_from_profiler_json(nlohmann::json::parse("42"), "t.json"); });
  EXPECT_NE(m.find("not a torch.profiler trace"), std::string::npos) << m;
}

}  // namespace
}  // namespace remat
