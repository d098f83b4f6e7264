// Run and sweep directories of every format version, committed under tests/data/ (run-vN,
// sweep-vN: written by `rematlab-batch run --model tiny --steps 1` and `sweep --model tiny
// --policies none --steps 1 --warmup 0` of that version). They are read forever: a new version
// adds fixtures and never removes these (core/trace/schema.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/trace/run_dir.h"
#include "core/trace/schema.h"
#include "core/trace/summary.h"
#include "core/trace/sweep_json.h"
#include "core/trace/table_reader.h"
#include "trace_test_util.h"

namespace fs = std::filesystem;

namespace remat {
namespace {

using testing::slurp;
using testing::TempDir;

// The fixtures named PREFIX-vN, with N.
std::vector<std::pair<fs::path, int>> fixtures(const std::string& prefix) {
  std::vector<std::pair<fs::path, int>> out;
  const std::regex name(prefix + "-v([0-9]+)");
  for (const auto& e : fs::directory_iterator(REMAT_TEST_DATA_DIR)) {
    std::smatch m;
    const std::string f = e.path().filename().string();
    if (e.is_directory() && std::regex_match(f, m, name)) out.emplace_back(e.path(), std::stoi(m[1]));
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(RunDirFixtures, ThereIsOneOfTheCurrentVersion) {
  bool run = false, sweep = false;
  for (const auto& [p, v] : fixtures("run")) run = run || v == kTraceFormatVersion;
  for (const auto& [p, v] : fixtures("sweep")) sweep = sweep || v == schema::kSweepFormatVersion;
  EXPECT_TRUE(run) << "no tests/data/run-v" << kTraceFormatVersion;
  EXPECT_TRUE(sweep) << "no tests/data/sweep-v" << schema::kSweepFormatVersion;
}

TEST(RunDirFixtures, EveryVersionReadsBackWithItsFigures) {
  for (const auto& [dir, version] : fixtures("run")) {
    SCOPED_TRACE(dir.string());
    const Trace t = read_run_dir(dir.string());
    EXPECT_EQ(t.format_version, version);
    EXPECT_TRUE(t.complete);
    EXPECT_EQ(t.model.name, "tiny");
    // Every figure of the summary is restored.
    nlohmann::json on_disk = nlohmann::json::parse(slurp((dir / kSummaryFile).string()));
    on_disk.erase("files");
    EXPECT_EQ(summary_json(t), on_disk);
    EXPECT_EQ(t.step_stats.size(), static_cast<std::size_t>(t.warmup + t.steps));
    EXPECT_FALSE(t.events.empty());
    EXPECT_FALSE(t.ops.empty());
  }
}

TEST(RunDirFixtures, TheCurrentVersionIsWrittenByteForByte) {
  for (const auto& [dir, version] : fixtures("run")) {
    if (version != kTraceFormatVersion) continue;
    const Trace t = read_run_dir(dir.string());
    TempDir d;
    write_csv_tables(t, d.path().string());
    for (const auto& f : csv_table_files())
      EXPECT_EQ(slurp((dir / f).string()), slurp(d / f)) << dir << "/" << f;
    // ... with the header the schema gives for the version.
    for (const auto& tab : schema::tables()) {
      std::string want;
      for (const auto& c : tab.header(version)) want += (want.empty() ? "" : ",") + c;
      const std::string file = slurp((dir / std::string(tab.file)).string());
      EXPECT_EQ(file.substr(0, file.find('\n')), want) << tab.file;
    }
  }
}

TEST(RunDirFixtures, EverySweepVersionReadsWithItsRuns) {
  for (const auto& [dir, version] : fixtures("sweep")) {
    SCOPED_TRACE(dir.string());
    const nlohmann::json j = read_sweep_json((dir / "sweep.json").string());
    EXPECT_EQ(j["format_version"], version);
    ASSERT_FALSE(j["runs"].empty());
    for (const auto& r : j["runs"]) {
      const Trace t = read_run_dir((dir / r["dir"].get<std::string>()).string());
      EXPECT_EQ(t.policy, r["policy"]);
      EXPECT_EQ(t.status, r["status"]);
    }
  }
}

TEST(SweepJson, NewerVersionsMissingFieldsAndOutsideRunsAreRefusedByName) {
  const auto [dir, version] = fixtures("sweep").back();
  const nlohmann::json good = nlohmann::json::parse(slurp((dir / "sweep.json").string()));
  TempDir d;
  auto refusal = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    testing::spit(d / "sweep.json", j.dump());
    try {
      read_sweep_json(d / "sweep.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto has = [](const std::string& msg, const std::string& what) {
    return msg.find(what) != std::string::npos ? ::testing::AssertionSuccess()
                                               : ::testing::AssertionFailure() << msg;
  };
  EXPECT_TRUE(has(refusal([](nlohmann::json& j) { j["format_version"] = 9; }),
                  "sweep.json: format version 9 is newer than this RematLab reads (1); upgrade RematLab"));
  EXPECT_TRUE(has(refusal([](nlohmann::json& j) { j.erase("format_version"); }),
                  "sweep.json: field 'format_version' must be an integer, got null"));
  EXPECT_TRUE(has(refusal([](nlohmann::json& j) { j.erase("steps"); }), "sweep.json: missing field 'steps'"));
  EXPECT_TRUE(has(refusal([](nlohmann::json& j) { j["runs"][0]["dir"] = 3; }),
                  "sweep.json 'runs' entry 0: field 'dir' must be a string, got 3"));
  EXPECT_TRUE(has(refusal([](nlohmann::json& j) { j["runs"][0]["dir"] = "../elsewhere"; }),
                  "field 'dir' \"../elsewhere\" is not a directory inside the sweep directory"));
  EXPECT_TRUE(has(refusal([](nlohmann::json& j) { j["runs"][0]["dir"] = "/etc"; }), "is not a directory inside"));
  EXPECT_TRUE(has(refusal([](nlohmann::json& j) { j["format"] = "rematlab-run"; }), "not a RematLab sweep file"));
  EXPECT_EQ(refusal([](nlohmann::json&) {}), "no error");
}

// The mechanism a new version uses (core/trace/schema.h): a column is in the versions from its
// `since`, a reader of an older file knows it lacks the column, and a file with a column its
// version does not have is refused.
TEST(SchemaVersions, AColumnIsReadOnlyInTheVersionsThatHaveIt) {
  using schema::Bound;
  using schema::Column;
  using schema::Type;
  schema::Table t{"x.csv", true, {Column{"a", Type::Int, Bound::None}, Column{"b", Type::Int, Bound::None}}, {}};
  t.columns[1].since = 2;
  EXPECT_EQ(t.header(1), std::vector<std::string>{"a"});
  EXPECT_EQ(t.header(2), (std::vector<std::string>{"a", "b"}));
  TempDir d;
  testing::spit(d / "old.csv", "a\n7\n");
  testing::spit(d / "new.csv", "a,b\n7,8\n");
  auto ctx = [](int version) { return TableContext{version, 4, 1}; };
  {
    TableReader r(d / "old.csv", t, ctx(1));
    EXPECT_FALSE(r.has(r.col("b")));
    ASSERT_TRUE(r.next());
    EXPECT_EQ(r.i64(r.col("a")), 7);
  }
  {
    TableReader r(d / "new.csv", t, ctx(2));
    EXPECT_TRUE(r.has(r.col("b")));
    ASSERT_TRUE(r.next());
    EXPECT_EQ(r.i64(r.col("b")), 8);
  }
  auto refusal = [&](const std::string& file, int version) {
    try {
      TableReader r(d / file, t, ctx(version));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(refusal("new.csv", 1).find("column 'b' is not in format version 1"), std::string::npos);
  EXPECT_NE(refusal("old.csv", 2).find("missing column 'b'"), std::string::npos);
}

}  // namespace
}  // namespace remat
