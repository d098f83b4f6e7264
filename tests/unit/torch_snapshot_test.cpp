// A torch memory snapshot as a Trace: the events, bytes and reserved bytes that
// tests/data/torch/make_fixtures.py wrote into NAME.expected.json, in both layouts; refusals;
// and the run directory it becomes, read back.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/trace/import_trace.h"
#include "core/trace/run_dir.h"
#include "core/trace/torch_snapshot.h"
#include "core/util/error.h"
#include "test_files.h"

namespace remat {
namespace {

using remat::testing::message_of;

std::string fixture(const std::string& name) { return std::string(REMAT_TEST_DATA_DIR) + "/torch/" + name; }
nlohmann::json expected(const std::string& name) {
  return nlohmann::json::parse(remat::testing::slurp(fixture(name + ".expected.json")));
}

void check_against_expected(const Trace& t, const nlohmann::json& x) {
  EXPECT_EQ(t.source, x["source"].get<std::string>());
  ASSERT_EQ(t.events.size(), x["memory_events"].get<std::size_t>());
  std::size_t baseline = 0;
  std::int64_t allocated = 0, live = 0, peak = 0;
  for (const auto& e : t.events) {
    baseline += e.step == -1;
    if (e.delta > 0) allocated += e.delta;
    live += e.delta;
    peak = std::max(peak, live);
    EXPECT_EQ(e.category, Category::Unknown);
  }
  EXPECT_EQ(baseline, x["baseline_events"].get<std::size_t>());
  EXPECT_EQ(t.step_first_event, baseline);
  EXPECT_EQ(allocated, x["allocated_bytes"].get<std::int64_t>());
  EXPECT_EQ(live, x["live_bytes_at_end"].get<std::int64_t>());
  EXPECT_EQ(static_cast<std::int64_t>(t.peak_bytes), x["peak_bytes"].get<std::int64_t>());
  EXPECT_EQ(peak, x["peak_bytes"].get<std::int64_t>());
  ASSERT_EQ(t.step_stats.size(), 1u);
  EXPECT_EQ(t.step_stats[0].peak_bytes, t.peak_bytes);
  if (x.contains("reserved_bytes_at_end")) {
    EXPECT_EQ(t.events.back().reserved, x["reserved_bytes_at_end"].get<std::uint64_t>());
    EXPECT_EQ(t.events.front().reserved, x["reserved_bytes_at_start"].get<std::uint64_t>());
  }
  if (!x["duration_ns"].is_null()) EXPECT_EQ(t.step_end_ns, x["duration_ns"].get<std::int64_t>());
}

TEST(TorchSnapshot, Torch2LayoutMatchesWhatTheFixtureWrote) {
  Trace t = import_torch_snapshot(fixture("snapshot-torch2.pickle"));
  auto x = expected("snapshot-torch2");
  check_against_expected(t, x);
  // The innermost frames name each allocation; the autograd frames mark backward.
  bool named = false, backward = false;
  for (const auto& e : t.events) {
    named = named || t.names[e.tensor] == x["a_name"].get<std::string>();
    backward = backward || e.phase == Phase::Backward;
  }
  EXPECT_TRUE(named);
  EXPECT_TRUE(backward);
  EXPECT_FALSE(t.peak_tensors.empty());
}

TEST(TorchSnapshot, Torch113LayoutMatchesWhatTheFixtureWrote) {
  Trace t = import_torch_snapshot(fixture("snapshot-torch113.pickle"));
  check_against_expected(t, expected("snapshot-torch113"));
  bool layout = false;
  for (const auto& [k, v] : t.provenance) layout = layout || (k == "snapshot_layout" && v == "torch 1.13");
  EXPECT_TRUE(layout);
}

TEST(TorchSnapshot, RefusesWhatIsNoSnapshot) {
  std::string m = message_of([] { import_torch_snapshot(fixture("unknown-layout.pickle")); });
  EXPECT_NE(m.find("action 'teleport' is not one this reader knows"), std::string::npos) << m;
  EXPECT_NE(m.find("trace entry 1 of device 0"), std::string::npos) << m;
  m = message_of([] { import_torch_snapshot(fixture("not-a-snapshot.pickle")); });
  EXPECT_NE(m.find("not a torch.cuda memory snapshot"), std::string::npos) << m;
  m = message_of([] { import_trace_file(fixture("runs-code-global.pickle")); });
  EXPECT_NE(m.find("opcode GLOBAL"), std::string::npos) << m;
  // Neither a pickle nor JSON.
  remat::testing::TempDir d;
  remat::testing::spit(d / "x.bin", "PK\x03\x04");
  m = message_of([&] { import_trace_file(d / "x.bin"); });
  EXPECT_NE(m.find("neither a torch memory snapshot"), std::string::npos) << m;
}

// A torch 2 snapshot of one allocation whose only frame is {filename, line, name}, written with
// the pickle opcodes Python's pickler uses (protocol 4).
std::string one_alloc_snapshot(const std::string& filename, const std::string& name) {
  auto str = [](const std::string& v) {
    std::string s = "X";
    for (int i = 0; i < 4; ++i) s += static_cast<char>((v.size() >> (8 * i)) & 255);
    return s + v;
  };
  auto num = [](int v) { return std::string("J") + static_cast<char>(v & 255) + static_cast<char>((v >> 8) & 255) +
                                static_cast<char>((v >> 16) & 255) + static_cast<char>((v >> 24) & 255); };
  const std::string frame = "}(" + str("filename") + str(filename) + str("line") + num(7) + str("name") + str(name) + "u";
  const std::string entry = "}(" + str("action") + str("alloc") + str("addr") + num(4096) + str("size") + num(512) +
                            str("time_us") + num(10) + str("frames") + "](" + frame + "eu";
  return std::string("\x80\x04") + "}(" + str("segments") + "]" + str("device_traces") + "](](" + entry + "ee" + "u.";
}

TEST(TorchSnapshot, FrameNamesAreTextItCanWriteAndNoLongerThanAName) {
  remat::testing::TempDir d;
  remat::testing::spit(d / "ok.pickle", one_alloc_snapshot("/src/model.py", "forward"));
  Trace t = import_torch_snapshot(d / "ok.pickle");
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.names[t.events[0].tensor], "model.py:7:forward");
  // A NUL or invalid UTF-8 would make a directory that compare and export refuse, or none.
  std::string m = message_of([&] {
    remat::testing::spit(d / "nul.pickle", one_alloc_snapshot("/src/model.py", std::string("for\0ward", 8)));
    import_torch_snapshot(d / "nul.pickle");
  });
  EXPECT_NE(m.find("trace entry 0 of device 0 frame 0: 'name' holds a NUL byte at offset 3"), std::string::npos) << m;
  m = message_of([&] {
    remat::testing::spit(d / "utf8.pickle", one_alloc_snapshot("/src/mod\xff" "el.py", "forward"));
    import_torch_snapshot(d / "utf8.pickle");
  });
  EXPECT_NE(m.find("'filename' is not valid UTF-8 (byte 0xff at offset 8)"), std::string::npos) << m;
  // A name of a megabyte is cut at a character boundary, as every event carrying it would copy it.
  std::string long_name;
  while (long_name.size() < (1u << 20)) long_name += "\xe2\x82\xac";  // €, three bytes
  remat::testing::spit(d / "long.pickle", one_alloc_snapshot("/src/model.py", long_name));
  t = import_torch_snapshot(d / "long.pickle");
  const std::string& n = t.names[t.events[0].tensor];
  EXPECT_LT(n.size(), 300u);
  EXPECT_EQ(n.substr(n.size() - 3), "...");
  EXPECT_EQ(n.substr(0, 11), "model.py:7:");
  EXPECT_EQ((n.size() - 11 - 3) % 3, 0u) << "cut inside a character";
  write_run_dir(t, d / "run", false);
  EXPECT_EQ(read_run_dir(d / "run").events.size(), 1u);
}

TEST(TorchSnapshot, BecomesARunDirectoryThatReadsBack) {
  remat::testing::TempDir d;
  Trace t = import_trace_file(fixture("snapshot-torch2.pickle"));
  write_run_dir(t, d / "run", false);
  Trace back = read_run_dir(d / "run");
  EXPECT_EQ(back.source, "pytorch-snapshot");
  EXPECT_EQ(back.events.size(), t.events.size());
  EXPECT_EQ(back.peak_bytes, t.peak_bytes);
  EXPECT_EQ(back.peak_reserved_bytes, t.peak_reserved_bytes);
  EXPECT_EQ(back.names.size(), t.names.size());
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    ASSERT_EQ(back.events[i].delta, t.events[i].delta) << i;
    ASSERT_EQ(back.names[back.events[i].tensor], t.names[t.events[i].tensor]) << i;
  }
  // The memory timeline has the unknown category's column.
  std::string header = remat::testing::slurp(d / "run/memory_timeline.csv");
  header = header.substr(0, header.find('\n'));
  EXPECT_NE(header.find(",host_offloaded,unknown"), std::string::npos) << header;
}

TEST(TorchSnapshot, ARunOfOurOwnWithAScheduleIsNoImport) {
  // An imported run directory whose schedule.json gained actions is refused.
  remat::testing::TempDir d;
  Trace t = import_trace_file(fixture("snapshot-torch2.pickle"));
  t.schedule.forward(0);
  write_run_dir(t, d / "run", false);
  std::string m = message_of([&] { read_run_dir(d / "run"); });
  EXPECT_NE(m.find("in a trace imported from pytorch-snapshot"), std::string::npos) << m;
}

TEST(TorchSnapshot, UnknownIsACategoryOfFormatVersionTwoOn) {
  // A version 1 run directory whose events say 'unknown' is refused (that version has no such
  // category, nor its memory_timeline.csv column).
  remat::testing::TempDir d;
  std::filesystem::copy(std::string(REMAT_TEST_DATA_DIR) + "/run-v1", d / "run");
  std::string ev = remat::testing::slurp(d / "run/memory_events.csv");
  for (auto p = ev.find(",logits_loss,"); p != std::string::npos; p = ev.find(",logits_loss,"))
    ev.replace(p, 13, ",unknown,");
  remat::testing::spit(d / "run/memory_events.csv", ev);
  std::string m = message_of([&] { read_run_dir(d / "run"); });
  EXPECT_NE(m.find("'unknown' is a category of format version 2 on, this file is version 1"), std::string::npos) << m;
}

}  // namespace
}  // namespace remat
