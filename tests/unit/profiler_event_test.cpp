// ProfilerEvent read from a parsed object and from the parse events of the same text: the same
// fields, with the last of a repeated key counting and members of another type read as absent.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/trace/profiler_event.h"
#include "core/util/json_io.h"
#include "test_files.h"

namespace remat {
namespace {

// The events of `{"traceEvents": [events]}` as the streamed reader has them.
std::vector<ProfilerEvent> streamed(const std::string& events) {
  testing::TempDir d;
  testing::spit(d / "t.json", "{\"traceEvents\": [" + events + "]}");
  std::vector<ProfilerEvent> out;
  ProfilerEventSax sax([&](std::size_t path, std::size_t index, const ProfilerEvent& e) {
    EXPECT_EQ(path, 0u);
    EXPECT_EQ(index, out.size());
    out.push_back(e);
  });
  read_json_file_streaming(d / "t.json", {{"traceEvents"}}, sax);
  return out;
}

void expect_same(const ProfilerEvent& a, const ProfilerEvent& b, const std::string& text) {
  SCOPED_TRACE(text);
  EXPECT_EQ(a.not_object, b.not_object);
  EXPECT_EQ(a.ts, b.ts);
  EXPECT_EQ(a.dur, b.dur);
  EXPECT_EQ(a.has_ph, b.has_ph);
  EXPECT_EQ(a.ph, b.ph);
  EXPECT_EQ(a.has_name, b.has_name);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.cat_kind, b.cat_kind);
  EXPECT_EQ(a.cat, b.cat);
  EXPECT_EQ(a.pid, b.pid);
  EXPECT_EQ(a.tid, b.tid);
  for (int k = 0; k < ProfilerEvent::kArgs; ++k) EXPECT_EQ(a.args[k], b.args[k]) << "arg " << k;
}

TEST(ProfilerEvent, StreamedAndParsedEventsReadTheSame) {
  const std::vector<std::string> events = {
      R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 8, "ts": 1.5, "dur": 2,
          "args": {"External id": 3, "correlation": 4, "flops": 18446744073709551615, "Device Type": 1,
                   "Device Id": 0, "Addr": -12, "Bytes": 512, "Total Reserved": 4096, "other": [1, {"flops": 9}]}})",
      R"({"ts": 1, "ts": "later", "dur": 3, "dur": 4.25, "name": "a", "name": {"x": 1}, "ph": ["X"], "cat": 5})",
      R"({"args": {"flops": 5}, "args": 3, "pid": 1.0, "tid": "2", "cat": "kernel", "cat": null})",
      R"({"args": {"flops": 5, "flops": 2.5, "Bytes": 1, "Bytes": true, "Addr": {}, "Device Id": [], "correlation": 6}})",
      R"({"args": {"flops": 5}, "args": {"Bytes": 6}, "name": "n", "ph": "i", "nested": {"ts": 9, "args": {"Bytes": 1}}})",
      R"({"ts": 1e300, "dur": -0.0, "pid": -1, "tid": 18446744073709551615})",
      R"({})", R"([])", R"([{"ts": 1}])", R"(42)", R"(-3.5)", R"("text")", R"(true)", R"(null)", R"({"": 1, "ts ": 2})",
  };
  std::string all;
  for (const auto& e : events) all += (all.empty() ? "" : ", ") + e;
  const std::vector<ProfilerEvent> got = streamed(all);
  ASSERT_EQ(got.size(), events.size());
  for (std::size_t i = 0; i < events.size(); ++i)
    expect_same(got[i], profiler_event(parse_json(events[i], "event")), events[i]);

  // And what they read, stated: the last key counts, other types are absent.
  EXPECT_EQ(got[0].args[ProfilerEvent::Flops], -1);  // 2^64 - 1 as an int64
  EXPECT_EQ(got[0].args[ProfilerEvent::Addr], -12);
  EXPECT_EQ(got[0].pid, 7u);
  EXPECT_EQ(got[1].ts, std::nullopt);
  EXPECT_EQ(got[1].dur, 4.25);
  EXPECT_FALSE(got[1].has_name);
  EXPECT_FALSE(got[1].has_ph);
  EXPECT_EQ(got[1].cat_kind, ProfilerEvent::Cat::Other);
  EXPECT_EQ(got[2].args[ProfilerEvent::Flops], std::nullopt);
  EXPECT_EQ(got[2].pid, 0u);
  EXPECT_EQ(got[2].tid, 0u);
  EXPECT_EQ(got[3].args[ProfilerEvent::Flops], std::nullopt);
  EXPECT_EQ(got[3].args[ProfilerEvent::Bytes], std::nullopt);
  EXPECT_EQ(got[3].args[ProfilerEvent::Addr], std::nullopt);
  EXPECT_EQ(got[3].args[ProfilerEvent::Correlation], 6);
  EXPECT_EQ(got[4].args[ProfilerEvent::Flops], std::nullopt);
  EXPECT_EQ(got[4].args[ProfilerEvent::Bytes], 6);
  EXPECT_EQ(got[4].ts, std::nullopt);
  EXPECT_EQ(got[5].pid, ~std::uint64_t{0});
  EXPECT_EQ(got[7].not_object, "an array");
  EXPECT_EQ(got[9].not_object, "42");
  EXPECT_EQ(got[11].not_object, "\"text\"");
  EXPECT_EQ(got[13].not_object, "null");
  EXPECT_TRUE(got[6].not_object.empty());
}

}  // namespace
}  // namespace remat
