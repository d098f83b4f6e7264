// Run directories: the CSV reader and writer, the memory timeline, and that a run written and
// read back is the same run (every record and every figure), with refusals that name the file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/analysis/memory_timeline.h"
#include "core/analysis/phase_spans.h"
#include "core/backend/cpu/cpu_backend.h"
#include "core/engine/run.h"
#include "core/graph/block_graph.h"
#include "core/profiler/host_profiler.h"
#include "core/trace/csv.h"
#include "core/trace/run_dir.h"
#include "core/trace/summary.h"
#include "core/util/error.h"
#include "trace_test_util.h"

namespace fs = std::filesystem;

namespace remat {
namespace {

using testing::read_error;
using testing::slurp;
using testing::spit;
using testing::synthetic_trace;
using testing::TempDir;

// ------------------------------------------------------------------ CSV

TEST(Csv, WritesAndReadsBackEveryValueExactly) {
  TempDir d;
  const std::vector<double> doubles = {0.0, -0.0, 0.1, 1.0 / 3.0, 4.976403620094061, 1e-300, 5e-324,
                                       1.7976931348623157e308, -2.5,
                                       std::numeric_limits<double>::infinity()};
  const std::vector<std::string> texts = {"plain", "with,comma", "with \"quotes\"", "", "line\nbreak",
                                          " padded ", "h3.attn.qkv"};
  {
    csv::Writer w(d / "t.csv", {"i", "u", "d", "s"});
    for (std::size_t k = 0; k < doubles.size(); ++k) {
      w.i64(k % 2 ? -static_cast<std::int64_t>(k) * 1000000007LL : INT64_MAX)
          .u64(k ? k : UINT64_MAX)
          .f64(doubles[k])
          .str(texts[k % texts.size()]);
      w.end_row();
    }
    EXPECT_EQ(w.rows(), doubles.size());
    w.commit();
  }
  csv::Reader r(d / "t.csv");
  std::size_t ci = r.col("i"), cu = r.col("u"), cd = r.col("d"), cs = r.col("s");
  std::size_t k = 0;
  while (r.next()) {
    EXPECT_EQ(r.i64(ci), k % 2 ? -static_cast<std::int64_t>(k) * 1000000007LL : INT64_MAX);
    EXPECT_EQ(r.u64(cu), k ? k : UINT64_MAX);
    double v = r.f64(cd);
    EXPECT_EQ(std::memcmp(&v, &doubles[k], sizeof v), 0) << k;  // the same bits, -0.0 included
    EXPECT_EQ(r.str(cs), texts[k % texts.size()]);
    ++k;
  }
  EXPECT_EQ(k, doubles.size());
  // NaN reads back as NaN.
  {
    csv::Writer w(d / "n.csv", {"x"});
    w.f64(std::nan(""));
    w.end_row();
    w.commit();
  }
  csv::Reader n(d / "n.csv");
  ASSERT_TRUE(n.next());
  EXPECT_TRUE(std::isnan(n.f64(0)));
}

TEST(Csv, RefusesTruncatedAndMalformedFilesNamingTheLine) {
  auto msg = [](const std::string& contents, auto&& body) {
    try {
      csv::Reader r("x.csv", contents);
      body(r);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto drain = [](csv::Reader& r) {
    while (r.next()) {
    }
  };
  EXPECT_NE(msg("", drain).find("empty"), std::string::npos);
  EXPECT_NE(msg("a,b\n1,2\n3", drain).find("truncated"), std::string::npos);
  EXPECT_NE(msg("a,b\n1,2\n3\n", drain).find("line 3"), std::string::npos);
  EXPECT_NE(msg("a,b\n1,\"2\n", drain).find("unterminated"), std::string::npos);
  EXPECT_NE(msg("a,b\n1,2\n", [](csv::Reader& r) { r.col("c"); }).find("missing column 'c'"),
            std::string::npos);
  std::string bad = msg("a,b\n1,x2\n", [](csv::Reader& r) {
    r.next();
    r.i64(1);
  });
  EXPECT_NE(bad.find("line 2, column 'b'"), std::string::npos) << bad;
  EXPECT_NE(msg("a,b\n-1,2\n", [](csv::Reader& r) {
              r.next();
              r.u64(0);
            }).find("non-negative"),
            std::string::npos);
  // CRLF line ends are read too.
  csv::Reader crlf("x.csv", "a,b\r\n1,\"q\"\r\n");
  ASSERT_TRUE(crlf.next());
  EXPECT_EQ(crlf.i64(0), 1);
  EXPECT_EQ(crlf.str(1), "q");
}

TEST(Csv, AWideHeaderIsCheckedForRepeatsInOnePass) {
  // 10^5 columns took 9.8 s when every pair was compared.
  std::string header;
  for (int i = 0; i < 100000; ++i) header += (i ? ",c" : "c") + std::to_string(i);
  csv::Reader wide("x.csv", header + "\n");
  EXPECT_EQ(wide.header().size(), 100000u);
  EXPECT_EQ(wide.col("c99999"), 99999u);
  try {
    csv::Reader r("x.csv", header + ",c5\n");
    FAIL() << "a repeated column was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.csv: column 'c5' appears twice"), std::string::npos) << e.what();
  }
}

TEST(Csv, OutFileLeavesNothingBehindWithoutCommit) {
  TempDir d;
  {
    csv::OutFile f(d / "x.txt");
    f.write("partial");
  }
  EXPECT_TRUE(fs::is_empty(d.path()));
  {
    csv::OutFile f(d / "x.txt");
    f.ns_as_us(1234567);
    f.put(' ');
    f.ns_as_us(-5);
    f.put(' ');
    f.json_string("a\"b\\c\n\x01");
    f.commit();
  }
  EXPECT_EQ(slurp(d / "x.txt"), "1234.567 -0.005 \"a\\\"b\\\\c\\n\\u0001\"");
}

void expect_same_trace(const Trace& a, const Trace& b) {
  EXPECT_EQ(summary_json(a), summary_json(b));
  ASSERT_EQ(a.events.size(), b.events.size());
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    const auto &x = a.events[i], &y = b.events[i];
    ASSERT_TRUE(x.t_ns == y.t_ns && x.delta == y.delta && x.id == y.id && x.category == y.category &&
                x.phase == y.phase && x.space == y.space && x.block == y.block && x.step == y.step &&
                x.reserved == y.reserved && x.op_seq == y.op_seq)
        << "event " << i;
    ASSERT_EQ(a.names[x.tensor], b.names[y.tensor]) << "event " << i;
  }
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    const auto &x = a.ops[i], &y = b.ops[i];
    ASSERT_TRUE(x.start_ns == y.start_ns && x.end_ns == y.end_ns && x.stream == y.stream &&
                x.name == y.name && x.op == y.op && x.block == y.block && x.phase == y.phase &&
                x.step == y.step && x.flops == y.flops && x.bytes == y.bytes && x.op_id == y.op_id)
        << "op " << i;
  }
  ASSERT_EQ(a.schedule_records.size(), b.schedule_records.size());
  for (std::size_t i = 0; i < a.schedule_records.size(); ++i) {
    const auto &x = a.schedule_records[i], &y = b.schedule_records[i];
    EXPECT_TRUE(x.index == y.index && x.action == y.action && x.block == y.block && x.keep == y.keep &&
                x.phase == y.phase && x.start_ns == y.start_ns && x.end_ns == y.end_ns && x.step == y.step);
  }
  ASSERT_EQ(a.ledger.size(), b.ledger.size());
  for (std::size_t i = 0; i < a.ledger.size(); ++i) {
    const auto &x = a.ledger[i], &y = b.ledger[i];
    EXPECT_TRUE(x.block == y.block && x.tensor == y.tensor && x.bytes == y.bytes &&
                x.created_ns == y.created_ns && x.freed_ns == y.freed_ns && x.created == y.created &&
                x.category == y.category && x.decision == y.decision && x.alloc_id == y.alloc_id &&
                x.free_id == y.free_id && x.why == y.why);
  }
  ASSERT_EQ(a.step_stats.size(), b.step_stats.size());
  for (std::size_t i = 0; i < a.step_stats.size(); ++i) {
    const auto &x = a.step_stats[i], &y = b.step_stats[i];
    EXPECT_TRUE(x.step == y.step && x.counted == y.counted && x.loss == y.loss && x.time_ms == y.time_ms &&
                x.peak_bytes == y.peak_bytes && x.reserved_bytes == y.reserved_bytes &&
                x.start_ns == y.start_ns && x.end_ns == y.end_ns);
  }
  EXPECT_EQ(schedule_to_json(a.schedule), schedule_to_json(b.schedule));
  EXPECT_EQ(a.step_first_event, b.step_first_event);
  EXPECT_EQ(a.step_end_event, b.step_end_event);
  EXPECT_EQ(a.memory_budget, b.memory_budget);
}

// ------------------------------------------------------------------ memory timeline

TEST(MemoryTimeline, StartsFromTheReplayedBaselineAndPeaksAtTheStepPeak) {
  Trace t = synthetic_trace(3, 400);
  MemoryTimeline m = memory_timeline(t);
  EXPECT_FALSE(m.range.whole_run);
  EXPECT_EQ(m.range.first, t.step_first_event);
  EXPECT_EQ(m.range.end, t.step_end_event);
  ASSERT_EQ(m.points.size(), t.step_end_event - t.step_first_event + 2);
  // Baseline: the static allocations before the first step (every step frees what it made).
  EXPECT_EQ(m.points.front().device, 5120);
  EXPECT_EQ(m.points.front().live[static_cast<int>(Category::Parameters)], 4096);
  EXPECT_EQ(m.points.front().t_ns, t.step_start_ns);
  EXPECT_EQ(m.points.back().t_ns, t.step_end_ns);
  EXPECT_EQ(static_cast<std::uint64_t>(m.peak_device), t.step_stats.back().peak_bytes);
  for (const auto& p : m.points) {
    std::int64_t sum = 0;
    for (auto v : p.live) sum += v;
    EXPECT_EQ(sum, p.device + p.host);
  }
  // Without the end index, the step's events are found by time.
  Trace u = t;
  u.step_end_event = 0;
  MemoryTimeline mu = memory_timeline(u);
  EXPECT_EQ(mu.range.end, t.step_end_event);
  EXPECT_EQ(mu.points.size(), m.points.size());
}

TEST(MemoryTimeline, AnIncompleteRunCoversEveryEvent) {
  Trace t = synthetic_trace(2, 50);
  t.step_start_ns = t.step_end_ns = 0;
  t.step_first_event = t.step_end_event = 0;
  MemoryTimeline m = memory_timeline(t);
  EXPECT_TRUE(m.range.whole_run);
  EXPECT_EQ(m.points.size(), t.events.size() + 2);
  EXPECT_EQ(m.points.front().device, 0);
  Trace empty;
  EXPECT_EQ(memory_timeline(empty).points.size(), 2u);
}

// ------------------------------------------------------------------ arithmetic on extreme values

TEST(TraceArithmetic, ChromeTraceDurationsOfExtremeTimesDoNotWrap) {
  Trace t = synthetic_trace(2, 10);
  t.ops[0].start_ns = std::numeric_limits<std::int64_t>::min();
  t.ops[0].end_ns = std::numeric_limits<std::int64_t>::max();
  t.schedule_records[0].start_ns = -10;
  t.schedule_records[0].end_ns = std::numeric_limits<std::int64_t>::max() - 5;
  TempDir d;
  write_chrome_trace(t, d / "trace.json");
  auto j = nlohmann::json::parse(slurp(d / "trace.json"));
  std::size_t checked = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X" || !e.contains("args")) continue;
    const bool op0 = e["name"] == t.ops[0].name && e["args"]["op_id"] == t.ops[0].op_id;
    const bool rec0 = e["tid"] == 10 && e["args"]["index"] == 0;
    if (!op0 && !rec0) continue;
    // The difference does not fit in 64 bits: the longest duration there is, never a wrapped one.
    EXPECT_GT(e["dur"].get<double>(), 9.2e15) << e.dump();
    ++checked;
  }
  EXPECT_EQ(checked, 2u);
}

TEST(TraceArithmetic, LiveBytesThatWouldOverflowAreAnErrorNotAWrappedFigure) {
  Trace t = synthetic_trace(2, 10);
  t.step_first_event = t.step_end_event = 0;
  t.step_start_ns = t.step_end_ns = 0;
  MemoryEvent e = t.events[0];
  e.delta = std::numeric_limits<std::int64_t>::max();
  e.id = 999;
  t.events.insert(t.events.begin() + 1, e);
  try {
    memory_timeline(t);
    FAIL() << "a sum past INT64_MAX was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("memory event 1 ("), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("overflow"), std::string::npos) << err.what();
  }
}

// ------------------------------------------------------------------ run directories

TEST(RunDir, SyntheticTraceReadsBackIdenticallyAndExportIsByteIdentical) {
  TempDir d;
  Trace t = synthetic_trace(4, 300);
  t.memory_budget = 123456;
  write_run_dir(t, d / "run", false);
  for (const auto& f : csv_table_files()) EXPECT_TRUE(fs::exists(fs::path(d / "run") / f)) << f;
  EXPECT_TRUE(fs::exists(fs::path(d / "run") / kSummaryFile));
  EXPECT_TRUE(fs::exists(fs::path(d / "run") / kScheduleFile));
  EXPECT_TRUE(fs::exists(fs::path(d / "run") / kChromeTraceFile));
  // Nothing but the run directory is left next to it.
  EXPECT_EQ(std::distance(fs::directory_iterator(d.path()), fs::directory_iterator()), 1);

  Trace r = read_run_dir(d / "run");
  expect_same_trace(t, r);
  // Regenerating from the read trace gives the same bytes.
  fs::create_directories(d / "again");
  write_csv_tables(r, d / "again");
  write_chrome_trace(r, d / "again/trace.json");
  for (const auto& f : csv_table_files())
    EXPECT_EQ(slurp(d / ("run/" + f)), slurp(d / ("again/" + f))) << f;
  EXPECT_EQ(slurp(d / "run/trace.json"), slurp(d / "again/trace.json"));
  // trace.json is one valid JSON document.
  auto j = nlohmann::json::parse(slurp(d / "run/trace.json"));
  ASSERT_TRUE(j["traceEvents"].is_array());
  std::size_t xs = 0, cs = 0;
  for (const auto& e : j["traceEvents"]) {
    xs += e["ph"] == "X";
    cs += e["ph"] == "C";
  }
  EXPECT_EQ(xs, t.ops.size() + t.schedule_records.size() + phase_spans(t).size());  // + the phases of the ops
  EXPECT_GT(cs, 0u);
}

TEST(RunDir, RealTrainingRunReadsBackWithTheSameFigures) {
  ModelConfig m;  // 2 blocks, h=64: a few ms per step
  m.name = "unit";
  m.dropout = 0.1;
  RunSpec spec;
  spec.model = m;
  spec.schedule = store_all_schedule(m.layers);
  spec.schedule.policy = "none";
  spec.steps = 2;
  spec.warmup = 1;
  CpuBackend cpu(1);
  SteadyClock clock;
  HostProfiler prof(clock);
  Trace t = run_training(spec, cpu, &prof, clock);
  ASSERT_TRUE(t.complete) << t.error;
  ASSERT_GT(t.step_end_event, t.step_first_event);

  TempDir d;
  write_run_dir(t, d / "run", false);
  Trace r = read_run_dir(d / "run");
  expect_same_trace(t, r);

  // The timeline's highest device total is the measured peak; its rows replay from the events.
  MemoryTimeline tl = memory_timeline(r);
  EXPECT_EQ(static_cast<std::uint64_t>(tl.peak_device), t.peak_bytes);
  EXPECT_EQ(static_cast<std::uint64_t>(tl.peak_device), t.step_stats.back().peak_bytes);
  // Ops of the CPU backend are in time order and do not overlap on a stream.
  for (std::size_t i = 1; i < r.ops.size(); ++i)
    if (r.ops[i].stream == r.ops[i - 1].stream) EXPECT_GE(r.ops[i].start_ns, r.ops[i - 1].end_ns) << i;
}

TEST(RunDir, RefusesToOverwriteWithoutForceAndReplacesWithIt) {
  TempDir d;
  Trace a = synthetic_trace(2, 20, 1), b = synthetic_trace(2, 30, 2);
  write_run_dir(a, d / "run", false);
  std::string before = slurp(d / "run/summary.json");
  try {
    write_run_dir(b, d / "run", false);
    FAIL() << "overwrote without --force";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos);
  }
  EXPECT_EQ(slurp(d / "run/summary.json"), before);
  write_run_dir(b, d / "run", true);
  EXPECT_EQ(read_run_dir(d / "run").events.size(), b.events.size());
  // Never replaces a directory that is not a run directory, even with force.
  fs::create_directories(d / "mine");
  spit(d / "mine/notes.txt", "keep me");
  EXPECT_THROW(write_run_dir(a, d / "mine", true), Error);
  EXPECT_EQ(slurp(d / "mine/notes.txt"), "keep me");
  // A file in the way of the parent.
  spit(d / "file", "x");
  EXPECT_THROW(write_run_dir(a, d / "file/run", false), Error);
  // No temporary directories are left behind.
  for (const auto& e : fs::directory_iterator(d.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(RunDir, CorruptOrTruncatedFilesAreRefusedByName) {
  TempDir d;
  Trace t = synthetic_trace(3, 200);
  write_run_dir(t, d / "good", false);
  auto fresh = [&](const std::string& name) {
    fs::copy(d / "good", d / name, fs::copy_options::recursive);
    return d / name;
  };
  EXPECT_NE(read_error(d / "absent").find("does not exist"), std::string::npos);
  fs::create_directories(d / "emptydir");
  EXPECT_NE(read_error(d / "emptydir").find("no summary.json"), std::string::npos);

  std::string dir = fresh("badjson");
  std::string s = slurp(dir + "/summary.json");
  spit(dir + "/summary.json", s.substr(0, s.size() / 2));
  EXPECT_NE(read_error(dir).find("summary.json: not valid JSON"), std::string::npos) << read_error(dir);

  // Valid JSON syntax, but a number no double holds.
  dir = fresh("hugenumber");
  spit(dir + "/summary.json", s.substr(0, s.rfind('}')) + ", \"x\": 1e400}");
  EXPECT_NE(read_error(dir).find("summary.json: not valid JSON"), std::string::npos) << read_error(dir);

  dir = fresh("badfield");
  auto j = nlohmann::json::parse(s);
  j["peak_bytes"] = "lots";
  spit(dir + "/summary.json", j.dump());
  EXPECT_NE(read_error(dir).find("'peak_bytes'"), std::string::npos) << read_error(dir);

  // Truncated in the middle of a row, and exactly at a row boundary.
  dir = fresh("midrow");
  std::string ev = slurp(dir + "/memory_events.csv");
  spit(dir + "/memory_events.csv", ev.substr(0, ev.size() - 7));
  EXPECT_NE(read_error(dir).find("memory_events.csv"), std::string::npos) << read_error(dir);
  dir = fresh("atrow");
  std::string ops = slurp(dir + "/ops.csv");
  spit(dir + "/ops.csv", ops.substr(0, ops.rfind('\n', ops.size() - 2) + 1));
  EXPECT_NE(read_error(dir).find("ops.csv"), std::string::npos) << read_error(dir);
  dir = fresh("tl");
  std::string tl = slurp(dir + "/memory_timeline.csv");
  auto pos = tl.find('\n', tl.find('\n') + 1) + 1;  // the second data row
  auto comma = tl.find(',', tl.find(',', pos) + 1);  // its device_bytes
  tl.insert(comma + 1, "9");
  spit(dir + "/memory_timeline.csv", tl);
  EXPECT_NE(read_error(dir).find("memory_timeline.csv line 3"), std::string::npos) << read_error(dir);
  dir = fresh("noloss");
  fs::remove(dir + "/loss.csv");
  EXPECT_NE(read_error(dir).find("loss.csv: missing"), std::string::npos) << read_error(dir);
  dir = fresh("badenum");
  std::string led = slurp(dir + "/ledger.csv");
  led.replace(led.find("recompute_temps"), 15, "recompute_tmps!");
  spit(dir + "/ledger.csv", led);
  EXPECT_NE(read_error(dir).find("unknown category 'recompute_tmps!'"), std::string::npos) << read_error(dir);
}

}  // namespace
}  // namespace remat
