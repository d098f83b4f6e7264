// A torch.profiler Chrome trace as a Trace: ops, their phases and the [memory] instants that
// tests/data/torch/make_fixtures.py wrote into profiler-trace.expected.json; refusals.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "core/analysis/slice_tree.h"
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

// Real traces of Debian's torch 1.13 (no Kineto), written by record_profiler_traces.py: the
// legacy bare array of "X" events without a category. Every event is a host op; the autograd
// engine's ops and what runs inside them are backward, the optimizer's optimizer; the ops nest
// inside the step's record_function range.
TEST(ProfilerTrace, ReadsTheLegacyLayoutOfTorch113) {
  for (const char* name : {"torch-1.13.0-profiler.json", "torch-1.13.0-autograd-profiler.json"}) {
    SCOPED_TRACE(name);
    const auto raw = nlohmann::json::parse(remat::testing::slurp(fixture(name)));
    ASSERT_TRUE(raw.is_array());
    std::size_t x = 0;
    for (const auto& e : raw) x += e.value("ph", "") == "X";
    Trace t = import_trace_file(fixture(name));
    EXPECT_EQ(t.source, "pytorch-profiler");
    EXPECT_EQ(t.device, "cpu");
    ASSERT_EQ(t.ops.size(), x);
    EXPECT_TRUE(t.events.empty());
    bool layout = false;
    for (const auto& [k, v] : t.provenance) layout = layout || (k == "profiler_layout" && v.find("legacy") == 0);
    EXPECT_TRUE(layout);
    std::map<Phase, std::size_t> phases;
    for (const auto& o : t.ops) {
      EXPECT_EQ(o.stream, Stream::Host) << o.name;
      EXPECT_EQ(o.op, "cpu_op") << o.name;
      ++phases[o.phase];
      if (o.name.rfind("autograd::engine::evaluate_function", 0) == 0 || o.name == "AddmmBackward0")
        EXPECT_EQ(o.phase, Phase::Backward) << o.name;
      if (o.name.rfind("Optimizer.", 0) == 0) EXPECT_EQ(o.phase, Phase::Optimizer) << o.name;
      if (o.name == "aten::linear" || o.name == "aten::gelu" || o.name == "train_step")
        EXPECT_EQ(o.phase, Phase::Forward) << o.name;
    }
    EXPECT_GT(phases[Phase::Forward], 10u);
    EXPECT_GT(phases[Phase::Backward], 10u);
    EXPECT_GT(phases[Phase::Optimizer], 3u);
    // Nested slices: on the outer host track the step's range (and the aten::zeros that
    // record_function makes just before it, in torch 1.13), every op inside it below it.
    const SliceTree tree(t);
    ASSERT_GE(tree.tracks().size(), 4u);
    const auto& outer = tree.tracks()[0].slices;
    ASSERT_LE(outer.size(), 2u);
    EXPECT_EQ(tree.name(t, 0, static_cast<int>(outer.size()) - 1), "train_step");
    if (outer.size() == 2) EXPECT_EQ(tree.name(t, 0, 0), "aten::zeros");
    std::size_t slices = 0;
    for (const auto& tr : tree.tracks()) slices += tr.slices.size();
    EXPECT_EQ(slices, t.ops.size());
  }
}

TEST(ProfilerTrace, LegacyEventsNeedTheirTimesAndOnlyTheBareArrayHasThem) {
  Trace t = trace_from_profiler_json(nlohmann::json::parse(
      R"([{"name": "aten::mm", "ph": "X", "ts": 3, "dur": 4, "tid": 1, "pid": "CPU functions", "args": {}},
          {"name": "x", "ph": "s", "ts": 3, "tid": 1, "pid": "CPU functions", "id": 0, "cat": "cpu_to_cuda", "args": {}}])"),
      "t.json");
  ASSERT_EQ(t.ops.size(), 1u);
  EXPECT_EQ(t.ops[0].end_ns - t.ops[0].start_ns, 4000);
  std::string m = message_of([] {
    trace_from_profiler_json(nlohmann::json::parse(R"([{"name": "aten::mm", "ph": "X", "ts": 3, "tid": 1}])"), "t.json");
  });
  EXPECT_NE(m.find("event 0 (aten::mm) has no 'dur'"), std::string::npos) << m;
  // A Kineto object's events always have a category: one without is not a CPU op there.
  m = message_of([] {
    trace_from_profiler_json(nlohmann::json::parse(R"({"traceEvents": [{"name": "aten::mm", "ph": "X", "ts": 3, "dur": 1}]})"), "t.json");
  });
  EXPECT_NE(m.find("no cpu_op, kernel"), std::string::npos) << m;
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

TEST(ProfilerTrace, AFileReadAsItIsParsedGivesWhatTheWholeDocumentGives) {
  // import_profiler_trace takes each event as the parser completes it; trace_from_profiler_json
  // walks a parsed document. Both wrapped in the object and as a bare array.
  const std::string text = remat::testing::slurp(fixture("profiler-trace.json"));
  const nlohmann::json whole = nlohmann::json::parse(text);
  remat::testing::TempDir d;
  for (const nlohmann::json& doc : {whole, whole["traceEvents"]}) {
    remat::testing::spit(d / "t.json", doc.dump());
    Trace a = import_profiler_trace(d / "t.json");
    Trace b = trace_from_profiler_json(doc, d / "t.json");
    ASSERT_EQ(a.ops.size(), b.ops.size());
    ASSERT_FALSE(a.ops.empty());
    for (std::size_t i = 0; i < a.ops.size(); ++i) {
      EXPECT_EQ(a.ops[i].name, b.ops[i].name);
      EXPECT_EQ(a.ops[i].start_ns, b.ops[i].start_ns);
      EXPECT_EQ(a.ops[i].phase, b.ops[i].phase);
      EXPECT_EQ(a.ops[i].op_id, b.ops[i].op_id);
    }
    ASSERT_EQ(a.events.size(), b.events.size());
    for (std::size_t i = 0; i < a.events.size(); ++i) {
      EXPECT_EQ(a.events[i].delta, b.events[i].delta);
      EXPECT_EQ(a.names[a.events[i].tensor], b.names[b.events[i].tensor]);
    }
    EXPECT_EQ(a.peak_bytes, b.peak_bytes);
  }
}

TEST(ProfilerTrace, RefusesWhatItCouldNotWriteBackAndReadsPastLeadingWhiteSpace) {
  remat::testing::TempDir d;
  // A NUL in an op's name would make an ops.csv that compare and export refuse.
  remat::testing::spit(d / "nul.json", R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::m\u0000m", "ts": 1, "dur": 2}]})");
  std::string m = message_of([&] { import_trace_file(d / "nul.json"); });
  EXPECT_NE(m.find("event 0 has a 'name' holding a NUL byte"), std::string::npos) << m;
  // A RematLab trace is named as such whatever its events hold.
  remat::testing::spit(d / "own.json", R"({"traceEvents": [42], "otherData": {"format": "rematlab-chrome-trace"}})");
  m = message_of([&] { import_trace_file(d / "own.json"); });
  EXPECT_NE(m.find("a RematLab trace.json"), std::string::npos) << m;
  // Two event lists are one too many.
  remat::testing::spit(d / "twice.json", R"({"traceEvents": [], "traceEvents": []})");
  m = message_of([&] { import_trace_file(d / "twice.json"); });
  EXPECT_NE(m.find("'traceEvents' appears twice"), std::string::npos) << m;
  // A megabyte of white space before the document (read a byte per read() before).
  remat::testing::spit(d / "ws.json", std::string(1 << 20, ' ') + "\n\t" + remat::testing::slurp(fixture("profiler-trace.json")));
  EXPECT_FALSE(import_trace_file(d / "ws.json").ops.empty());
  remat::testing::spit(d / "blank.json", std::string(1 << 17, '\n'));
  m = message_of([&] { import_trace_file(d / "blank.json"); });
  EXPECT_NE(m.find("empty"), std::string::npos) << m;
}

}  // namespace
}  // namespace remat
