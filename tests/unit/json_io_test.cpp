// What every reader of user files shares: regular files only, bounded size and JSON depth,
// no trailing bytes, checked narrowing, short quotations in messages.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/analysis/recorded_plan.h"
#include "core/model/model_config.h"
#include "core/model/model_source.h"
#include "core/schedule/schedule.h"
#include "core/trace/ranks_dir.h"
#include "core/trace/run_dir.h"
#include "core/util/json_io.h"
#include "test_files.h"

namespace remat {
namespace {

namespace fs = std::filesystem;

class JsonIo : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  testing::TempDir tmp_;
  const fs::path& dir_ = tmp_.path();
};

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

using testing::message_of;

TEST_F(JsonIo, DeepNestingIsALimitErrorNotACrash) {
  EXPECT_NO_THROW(parse_json(nested(limits::kJsonDepth), "x"));
  EXPECT_THROW(parse_json(nested(limits::kJsonDepth + 1), "x"), LimitError);
  // What crashed every reader: 100,000 nested arrays in a field that is quoted in the message.
  std::string p = write("deep.json", "{\"architecture\": \"gpt2\", \"name\": " + nested(100000) + "}");
  std::string m = message_of([&] { load_model_file(p); });
  EXPECT_NE(m.find("nested deeper than 64"), std::string::npos) << m;
  EXPECT_NE(m.find("deep.json"), std::string::npos) << m;
  std::string s = write("deep_schedule.json", "{\"blocks\": 1, \"actions\": [" + nested(100000) + "]}");
  EXPECT_THROW(load_schedule_file(s), LimitError);
}

TEST_F(JsonIo, TrailingBytesAfterTheDocumentAreRefused) {
  std::string p = write("m.json", "{\"architecture\":\"gpt2\",\"layers\":2,\"hidden\":64,\"heads\":4,"
                                  "\"seq\":16,\"batch\":1,\"vocab\":100} trailing");
  std::string m = message_of([&] { load_model_file(p); });
  EXPECT_NE(m.find("not valid JSON"), std::string::npos) << m;
  EXPECT_NO_THROW(parse_json("{}\n  \n", "x"));
}

TEST_F(JsonIo, StreamedArraysHandEachElementOverAndKeepTheRest) {
  std::vector<std::pair<std::size_t, std::string>> got;
  auto each = [&](std::size_t path, std::size_t i, nlohmann::json&& e) {
    got.emplace_back(path * 100 + i, e.dump());
  };
  nlohmann::json j = parse_json_streaming(
      R"({"a": 1, "traceEvents": [{"x": [1, 2]}, 2, [3], "s"], "b": {"traceEvents": [9]}, "c": [true]})", "x",
      {{"traceEvents"}, {"b", "c"}}, each);
  // The top-level array under the key only: the nested one of the same name and "c" are kept.
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], std::make_pair(std::size_t{0}, std::string(R"({"x":[1,2]})")));
  EXPECT_EQ(got[1], std::make_pair(std::size_t{1}, std::string("2")));
  EXPECT_EQ(got[2], std::make_pair(std::size_t{2}, std::string("[3]")));
  EXPECT_EQ(got[3], std::make_pair(std::size_t{3}, std::string(R"("s")")));
  EXPECT_EQ(j, nlohmann::json::parse(R"({"a": 1, "traceEvents": [], "b": {"traceEvents": [9]}, "c": [true]})"));

  got.clear();
  j = parse_json_streaming(R"({"schedule": {"blocks": 2, "actions": [{"a": 0}, {"a": 1}]}})", "x",
                           {{"actions"}, {"schedule", "actions"}}, each);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1], std::make_pair(std::size_t{101}, std::string(R"({"a":1})")));
  EXPECT_EQ(j["schedule"]["actions"], nlohmann::json::array());

  got.clear();
  j = parse_json_streaming("[[1], {}, null]", "x", {{}}, each);  // {}: the document itself
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(j, nlohmann::json::array());
}

TEST_F(JsonIo, StreamingKeepsEveryLimitAndRule) {
  auto each = [](std::size_t, std::size_t, nlohmann::json&&) {};
  EXPECT_THROW(parse_json_streaming("{\"e\": [" + nested(limits::kJsonDepth - 1) + "]}", "x", {{"e"}}, each), LimitError);
  EXPECT_NO_THROW(parse_json_streaming("{\"e\": [" + nested(limits::kJsonDepth - 2) + "]}", "x", {{"e"}}, each));
  std::string m = message_of([&] { parse_json_streaming(R"({"e": [1], "e": [2]})", "f.json", {{"e"}}, each); });
  EXPECT_NE(m.find("f.json: 'e' appears twice"), std::string::npos) << m;
  m = message_of([&] { parse_json_streaming(R"({"e": [1]} x)", "f.json", {{"e"}}, each); });
  EXPECT_NE(m.find("not valid JSON"), std::string::npos) << m;
  m = message_of([&] { parse_json_streaming(R"({"e": [1, )", "f.json", {{"e"}}, each); });
  EXPECT_NE(m.find("not valid JSON"), std::string::npos) << m;
  // What the handler throws ends the parse.
  EXPECT_THROW(parse_json_streaming("[1, 2]", "x", {{}}, [](std::size_t, std::size_t i, nlohmann::json&&) {
                 if (i == 1) throw Error("no");
               }),
               Error);
}

TEST_F(JsonIo, TheMemoryOfTheValuesIsBounded) {
  // 100,000 empty objects: about 6 MB of values from 300 KB of text.
  std::string text = "[";
  for (int i = 0; i < 100000; ++i) text += i ? ",{}" : "{}";
  text += "]";
  EXPECT_EQ(parse_json(text, "x", std::uint64_t{64} << 20).size(), 100000u);
  std::string m = message_of([&] { parse_json(text, "many.json", std::uint64_t{1} << 20); });
  EXPECT_NE(m.find("many.json: its values need more than the 1 MiB of memory this reader allows"), std::string::npos)
      << m;
  EXPECT_THROW(parse_json(text, "x", std::uint64_t{1} << 20), LimitError);
  // A streamed element's memory is let go with it.
  std::size_t n = 0;
  parse_json_streaming("{\"e\": " + text + "}", "x", {{"e"}}, [&](std::size_t, std::size_t, nlohmann::json&&) { ++n; });
  EXPECT_EQ(n, 100000u);
}

TEST_F(JsonIo, DuplicateKeysKeepTheLastValueAndNumbersKeepTheirKinds) {
  nlohmann::json j = parse_json(R"({"a": 1, "a": 2, "u": 18446744073709551615, "i": -1, "f": 0.5, "n": null})", "x");
  EXPECT_EQ(j["a"], 2);
  EXPECT_TRUE(j["u"].is_number_unsigned());
  EXPECT_EQ(j["u"].get<std::uint64_t>(), 18446744073709551615ULL);
  EXPECT_TRUE(j["i"].is_number_integer() && !j["i"].is_number_unsigned());
  EXPECT_TRUE(j["f"].is_number_float());
  EXPECT_TRUE(j["n"].is_null());
  EXPECT_EQ(parse_json(R"("\u00e9")", "x").get<std::string>(), "\xc3\xa9");
  std::string m = message_of([] { parse_json("[1e999]", "x"); });
  EXPECT_NE(m.find("not valid JSON"), std::string::npos) << m;
  m = message_of([] { parse_json("\"\xff\"", "x"); });  // the parser checks UTF-8
  EXPECT_NE(m.find("not valid JSON"), std::string::npos) << m;
}

TEST_F(JsonIo, ALargeArrayOfObjectsParsesWhole) {
  // nlohmann's callback parser rescanned an object's parent at each end of an object: 10^5
  // events took 2 s, 10^6 took 204 s (bench/json_read_bench.cpp measures the slope).
  std::string text = "[";
  for (int i = 0; i < 200000; ++i) text += std::string(i ? "," : "") + "{\"i\":" + std::to_string(i) + "}";
  text += "]";
  nlohmann::json j = parse_json(text, "x");
  ASSERT_EQ(j.size(), 200000u);
  EXPECT_EQ(j[199999]["i"], 199999);
}

TEST_F(JsonIo, OnlyRegularFilesAreRead) {
  std::string fifo = (dir_ / "fifo.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A plain open of a FIFO would block here forever.
  std::string m = message_of([&] { read_json_file(fifo); });
  EXPECT_NE(m.find("is a FIFO"), std::string::npos) << m;
  m = message_of([&] { read_json_file(dir_.string()); });
  EXPECT_NE(m.find("is a directory"), std::string::npos) << m;
  m = message_of([&] { read_json_file((dir_ / "absent.json").string()); });
  EXPECT_NE(m.find("missing"), std::string::npos) << m;
  m = message_of([&] { load_schedule_file(fifo); });
  EXPECT_NE(m.find("is a FIFO"), std::string::npos) << m;
}

TEST_F(JsonIo, AStreamedFileIsReadAMegabyteAtATimeWithEveryRuleKept) {
  // About 3 MiB: a string across the first megabyte's end, then elements across the next ones.
  std::string text = "{\"pad\": \"" + std::string((1 << 20) - 5, 'p') + "\", \"e\": [";
  const int n = 40000;
  for (int i = 0; i < n; ++i) text += (i ? ", " : "") + std::string("{\"i\": ") + std::to_string(i) + ", \"s\": \"" +
                                     std::string(static_cast<std::size_t>(i % 97), 's') + "\"}";
  text += "], \"after\": 7}\n";
  ASSERT_GT(text.size(), std::size_t{3} << 20);
  const std::string p = write("big.json", text);
  int seen = 0;
  bool in_order = true;
  nlohmann::json top = read_json_file_streaming(p, {{"e"}}, [&](std::size_t, std::size_t i, nlohmann::json&& e) {
    in_order = in_order && e["i"] == static_cast<int>(i) && e["s"].get<std::string>().size() == i % 97;
    ++seen;
  });
  EXPECT_EQ(seen, n);
  EXPECT_TRUE(in_order);
  EXPECT_EQ(top["pad"].get<std::string>().size(), std::size_t{(1 << 20) - 5});
  EXPECT_EQ(top["after"], 7);
  auto each = [](std::size_t, std::size_t, nlohmann::json&&) {};
  // Cut short, followed by more than white space, too deep: as parse_json_streaming says them.
  std::string m = message_of([&] { read_json_file_streaming(write("cut.json", text.substr(0, (2 << 20) + 3)), {{"e"}}, each); });
  EXPECT_NE(m.find("cut.json: not valid JSON"), std::string::npos) << m;
  m = message_of([&] { read_json_file_streaming(write("more.json", text + " x"), {{"e"}}, each); });
  EXPECT_NE(m.find("more.json: not valid JSON"), std::string::npos) << m;
  EXPECT_THROW(read_json_file_streaming(write("deep.json", "{\"e\": [" + nested(limits::kJsonDepth) + "]}"), {{"e"}}, each),
               LimitError);
  // Only regular files, and none past the limit (refused before reading: the file is sparse).
  const std::string fifo = (dir_ / "events.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  m = message_of([&] { read_json_file_streaming(fifo, {{"e"}}, each); });
  EXPECT_NE(m.find("is a FIFO"), std::string::npos) << m;
  const std::string huge = write("huge.json", "");
  ASSERT_EQ(::truncate(huge.c_str(), static_cast<off_t>(limits::kJsonFileBytes) + 1), 0);
  m = message_of([&] { read_json_file_streaming(huge, {{"e"}}, each); });
  EXPECT_NE(m.find("huge.json: 1 GiB is larger than the 1 GiB this reader accepts"), std::string::npos) << m;
}

// Writes the elements it is handed back as compact JSON text, one "path/index=" line each.
class EchoSax final : public JsonElementSax {
 public:
  std::string out;
  void begin_element(std::size_t path, std::size_t index) override {
    out += std::to_string(path) + "/" + std::to_string(index) + "=";
    first_ = {true};
  }
  void end_element() override { out += "\n"; }
  bool null() override { return put("null"); }
  bool boolean(bool v) override { return put(v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override { return put(std::to_string(v)); }
  bool number_unsigned(number_unsigned_t v) override { return put(std::to_string(v)); }
  bool number_float(number_float_t, const string_t& text) override { return put(text); }
  bool string(string_t& v) override { return put(nlohmann::json(v).dump()); }
  bool start_object(std::size_t) override { return open("{"); }
  bool start_array(std::size_t) override { return open("["); }
  bool key(string_t& k) override {
    put(nlohmann::json(k).dump() + ":");
    after_key_ = true;
    return true;
  }
  bool end_object() override { return close("}"); }
  bool end_array() override { return close("]"); }

 private:
  bool put(const std::string& t) {
    if (!after_key_ && !first_.back()) out += ",";
    first_.back() = after_key_ ? first_.back() : false;
    after_key_ = false;
    out += t;
    return true;
  }
  bool open(const char* t) {
    put(t);
    first_.push_back(true);
    return true;
  }
  bool close(const char* t) {
    first_.pop_back();
    out += t;
    return true;
  }
  std::vector<bool> first_{true};
  bool after_key_ = false;
};

TEST_F(JsonIo, AStreamedFileCanGoToASinkAsParseEvents) {
  const std::string p = write("sink.json", R"({"a": [1, {"b": [true, null, "x\"y", 2.5, -3, 18446744073709551615], "b": {}},
      [[]], "s", {}], "c": {"a": [9]}, "d": 1})");
  EchoSax sink;
  const nlohmann::json top = read_json_file_streaming(p, {{"a"}, {"c", "a"}}, sink);
  EXPECT_EQ(sink.out, "0/0=1\n0/1={\"b\":[true,null,\"x\\\"y\",2.5,-3,18446744073709551615],\"b\":{}}\n"
                      "0/2=[[]]\n0/3=\"s\"\n0/4={}\n1/0=9\n");
  EXPECT_EQ(top.dump(), R"({"a":[],"c":{"a":[]},"d":1})");
  // The element's levels count with those around it; a path twice, cut text and trailing bytes
  // are refused as without a sink.
  EchoSax s2;
  EXPECT_THROW(read_json_file_streaming(write("deep.json", "{\"e\": [" + nested(limits::kJsonDepth - 1) + "]}"), {{"e"}}, s2),
               LimitError);
  EXPECT_NO_THROW(read_json_file_streaming(write("ok.json", "{\"e\": [" + nested(limits::kJsonDepth - 2) + "]}"), {{"e"}}, s2));
  std::string m = message_of([&] { read_json_file_streaming(write("twice.json", R"({"e": [1], "e": [2]})"), {{"e"}}, s2); });
  EXPECT_NE(m.find("'e' appears twice"), std::string::npos) << m;
  m = message_of([&] { read_json_file_streaming(write("cut.json", R"({"e": [{"a": )"), {{"e"}}, s2); });
  EXPECT_NE(m.find("cut.json: not valid JSON"), std::string::npos) << m;
  m = message_of([&] { read_json_file_streaming(write("more.json", R"({"e": []} x)"), {{"e"}}, s2); });
  EXPECT_NE(m.find("more.json: not valid JSON"), std::string::npos) << m;
}

TEST_F(JsonIo, FilesLargerThanTheLimitAreRefusedBeforeReading) {
  std::string p = write("big.txt", std::string(1000, 'x'));
  EXPECT_EQ(read_regular_file(p, 1000).size(), 1000u);
  EXPECT_THROW(read_regular_file(p, 999), LimitError);
}

TEST_F(JsonIo, AFileTooLargeForMemoryIsANamedLimitNotABareBadAlloc) {
  // Refused before anything is allocated, whatever the kernel's overcommit setting (and under
  // ASan, which aborts on such a request instead of throwing).
  std::string p = write("sparse.bin", "");
  if (::truncate(p.c_str(), off_t{8} << 40) != 0) GTEST_SKIP() << "no 8 TiB sparse file here";
  try {
    read_regular_file(p, std::numeric_limits<std::uint64_t>::max());
    FAIL() << "read 8 TiB";
  } catch (const LimitError& e) {
    EXPECT_NE(std::string(e.what()).find("sparse.bin: 8192 GiB does not fit in memory"), std::string::npos) << e.what();
  }
}

TEST_F(JsonIo, IntegersAreNarrowedWithACheck) {
  // 4294967298 = 2^32 + 2 ran 2 layers before.
  nlohmann::json j = {{"architecture", "gpt2"}, {"layers", 4294967298LL}, {"hidden", 64}, {"heads", 4},
                      {"seq", 16}, {"batch", 1}, {"vocab", 100}};
  std::string m = message_of([&] { model_from_json(j); });
  EXPECT_NE(m.find("layers"), std::string::npos) << m;
  EXPECT_NE(m.find("4294967298"), std::string::npos) << m;
  EXPECT_THROW(json_int(nlohmann::json(18446744073709551615ULL), "f"), ConfigError);
  EXPECT_THROW(json_int(nlohmann::json(-2147483649LL), "f"), ConfigError);
  EXPECT_EQ(json_int(nlohmann::json(-2147483648LL), "f"), -2147483647 - 1);
  nlohmann::json s = {{"blocks", 2}, {"actions", {{{"action", "forward"}, {"block", 4294967297LL}}}}};
  m = message_of([&] { schedule_from_json(s); });
  EXPECT_NE(m.find("4294967297"), std::string::npos) << m;
}

TEST_F(JsonIo, LayersPastTheLimitAreANamedLimit) {
  nlohmann::json j = {{"architecture", "gpt2"}, {"layers", limits::kLayers + 1}, {"hidden", 64},
                      {"heads", 4}, {"seq", 16}, {"batch", 1}, {"vocab", 100}};
  EXPECT_THROW(model_from_json(j), LimitError);
  j["layers"] = limits::kLayers;
  EXPECT_NO_THROW(model_from_json(j));
}

TEST_F(JsonIo, SchedulesOfAnotherFormatOrANewerVersionAreRefused) {
  nlohmann::json s = {{"format", "rematlab-schedule"}, {"version", 1}, {"blocks", 1},
                      {"actions", {{{"action", "forward"}, {"block", 0}}}}};
  EXPECT_NO_THROW(schedule_from_json(s));
  s["version"] = 2;
  EXPECT_NO_THROW(schedule_from_json(s));
  s["version"] = 3;
  std::string m = message_of([&] { schedule_from_json(s); });
  EXPECT_NE(m.find("version 3 is not one this RematLab reads (1 or 2)"), std::string::npos) << m;
  s["version"] = 1;
  s["format"] = "something-else";
  EXPECT_THROW(schedule_from_json(s), Error);
}

TEST_F(JsonIo, AStringFieldOfAnotherTypeIsRefusedByName) {
  const nlohmann::json j = parse_json(R"({"format": 2, "status": "ok", "error": [1]})", "x");
  EXPECT_FALSE(json_string_is(j, "format", "2"));
  EXPECT_FALSE(json_string_is(j, "missing", ""));
  EXPECT_TRUE(json_string_is(j, "status", "ok"));
  EXPECT_EQ(json_string(j, "status", "-", "x"), "ok");
  EXPECT_EQ(json_string(j, "missing", "-", "x"), "-");
  const std::string m = message_of([&] { json_string(j, "error", "", "f.json"); });
  EXPECT_NE(m.find("f.json: field 'error' must be a string, got [1]"), std::string::npos) << m;

  // What the fuzzer found: a ranks.json whose "format" is a number threw the JSON library's
  // type error past every reader. Each of these is an Error now, saying what is wrong.
  const fs::path ranks = dir_ / "ranks";
  fs::create_directories(ranks);
  const std::string ok = R"("format_version": 1, "world_size": 1, "tp": 1, "dp": 1, "zero": 0, "sp": false,
      "complete": true, "ranks": [{"rank": 0, "tp_rank": 0, "dp_rank": 0, "dir": "rank-0", "complete": true)";
  const std::string file = (ranks / "ranks.json").string();
  std::ofstream(file) << R"({"format": 2, "complete": true, "dp": 1, "zero": 0})";
  EXPECT_THROW(read_ranks_json(ranks.string()), Error);
  EXPECT_THROW(read_run_dir(ranks.string()), Error);
  std::ofstream(file) << R"({"format": "rematlab-ranks", )" + ok + "}]}";
  EXPECT_NO_THROW(read_ranks_json(ranks.string()));
  std::ofstream(file) << R"({"format": "rematlab-ranks", "status": 7, )" + ok + "}]}";
  EXPECT_NE(message_of([&] { read_ranks_json(ranks.string()); }).find("field 'status' must be a string"), std::string::npos);
  std::ofstream(file) << R"({"format": "rematlab-ranks", )" + ok + R"(, "status": false}]})";
  EXPECT_NE(message_of([&] { read_ranks_json(ranks.string()); }).find("ranks[0]: field 'status' must be a string"),
            std::string::npos);
  std::ofstream(file) << R"({"format": "rematlab-ranks", "error": {}, )" + ok + "}]}";
  EXPECT_THROW(read_run_dir(ranks.string()), Error);  // rank 0 left no run directory; the error says why

  const fs::path rec = dir_ / "recorded";
  fs::create_directories(rec);
  std::ofstream((rec / "summary.json").string()) << R"({"source": 1})";
  EXPECT_THROW(read_recorded_run(rec.string()), Error);
}

TEST_F(JsonIo, SnippetsAreShort) {
  nlohmann::json big = nlohmann::json::array();
  for (int i = 0; i < 10000; ++i) big.push_back(i);
  std::string s = json_snippet(big);
  EXPECT_LT(s.size(), 140u) << s;
  EXPECT_NE(s.find("10000 elements"), std::string::npos) << s;
  EXPECT_EQ(json_snippet(nlohmann::json("abc")), "\"abc\"");
}

TEST_F(JsonIo, AFileInTheCurrentDirectoryNeverShadowsAPreset) {
  fs::path old = fs::current_path();
  fs::current_path(dir_);
  write("tiny", "{\"architecture\": \"gpt2\", \"layers\": 7, \"hidden\": 64, \"heads\": 4, \"seq\": 16, "
                "\"batch\": 1, \"vocab\": 100}");
  ModelConfig m;
  std::string err;
  try {
    m = resolve_model("tiny");
    ModelConfig local = resolve_model("./tiny");
    EXPECT_EQ(local.layers, 7);
    err = message_of([&] { resolve_model("nosuchpreset"); });
    write("mine", "{}");
    std::string hint = message_of([&] { resolve_model("mine"); });
    EXPECT_NE(hint.find("./mine"), std::string::npos) << hint;
  } catch (...) {
    fs::current_path(old);
    throw;
  }
  fs::current_path(old);
  EXPECT_NE(m.layers, 7);
  EXPECT_EQ(m.name, "tiny");
  EXPECT_NE(err.find("presets:"), std::string::npos) << err;
}

}  // namespace
}  // namespace remat
