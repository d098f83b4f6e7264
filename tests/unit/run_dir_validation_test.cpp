// Reading a run directory validates it: every file against the schema of its format version,
// and the files against each other. Each test corrupts one thing of a good run directory and
// checks the refusal names the file and the field, row or value.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/analysis/memory_timeline.h"
#include "core/trace/csv.h"
#include "core/trace/run_dir.h"
#include "core/trace/trace.h"
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

// A good run directory and copies of it to corrupt.
class RunDirValidation : public ::testing::Test {
 protected:
  void SetUp() override { write_run_dir(synthetic_trace(3, 200), d_ / "good", false); }
  // A fresh copy of the good directory with `edit` applied; returns its path.
  std::string corrupt(const std::string& name, const std::function<void(const std::string&)>& edit) {
    fs::copy(d_ / "good", d_ / name, fs::copy_options::recursive);
    edit(d_ / name);
    return d_ / name;
  }
  TempDir d_;
};

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(slurp(path)); }
void write_json(const std::string& path, const nlohmann::json& j) { spit(path, j.dump(2) + "\n"); }

void edit_json(const std::string& path, const std::function<void(nlohmann::json&)>& f) {
  nlohmann::json j = read_json(path);
  f(j);
  write_json(path, j);
}

// Rewrites one table with cell (row, column) set to `value` (row 0 = first data row).
void set_cell(const std::string& path, std::size_t row, const std::string& column, const std::string& value) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header;
  {
    csv::Reader r(path);
    for (auto h : r.header()) header.emplace_back(h);
    while (r.next()) {
      rows.emplace_back();
      for (std::size_t c = 0; c < header.size(); ++c) rows.back().emplace_back(r.str(c));
    }
    rows.at(row).at(r.col(column)) = value;
  }
  csv::Writer w(path, header);
  for (const auto& r : rows) {
    for (const auto& f : r) w.str(f);
    w.end_row();
  }
  w.commit();
}

// The rows of a table (its data rows).
std::size_t rows_of(const std::string& path) {
  csv::Reader r(path);
  std::size_t n = 0;
  while (r.next()) ++n;
  return n;
}

// Whether `msg` holds every word.
::testing::AssertionResult names(const std::string& msg, std::initializer_list<const char*> words) {
  for (const char* w : words)
    if (msg.find(w) == std::string::npos) return ::testing::AssertionFailure() << "'" << w << "' not in: " << msg;
  return ::testing::AssertionSuccess();
}

TEST_F(RunDirValidation, TheGoodDirectoryReads) { EXPECT_EQ(read_error(d_ / "good"), "no error"); }

// ------------------------------------------------------------------ schedule.json and the model

TEST_F(RunDirValidation, ScheduleJsonIsValidatedAgainstTheModel) {
  std::string dir = corrupt("block99", [](const std::string& d) {
    edit_json(d + "/schedule.json", [](nlohmann::json& j) { j["actions"][2]["block"] = 99; });
  });
  EXPECT_TRUE(names(read_error(dir), {"schedule.json", "action 2", "block 99"}));
  // A valid schedule of another plan than the summary's: block 0 checkpointed and recomputed.
  dir = corrupt("otherplan", [](const std::string& d) {
    edit_json(d + "/schedule.json", [](nlohmann::json& j) {
      j["actions"][0]["keep"] = "input";
      j["actions"].insert(j["actions"].end() - 1,
                         nlohmann::json::object({{"action", "recompute"}, {"block", 0}, {"keep", "all"}}));
    });
    edit_json(d + "/summary.json", [](nlohmann::json& j) { j["plan"]["actions"] = 9; });
  });
  EXPECT_TRUE(names(read_error(dir), {"schedule.json", "summary.json 'plan'"}));
}

TEST_F(RunDirValidation, ModelLayersMustMatchTheTablesAndTheSchedule) {
  // 5 layers for tables and a schedule of 4 blocks.
  std::string dir = corrupt("layers5", [](const std::string& d) {
    edit_json(d + "/summary.json", [](nlohmann::json& j) {
      j["model"]["layers"] = 5;
      j["saved_bytes_per_block"].push_back(0);
      j["host_bytes_per_block"].push_back(0);
    });
  });
  EXPECT_TRUE(names(read_error(dir), {"schedule.json", "4 blocks", "the model has 5"}));
  dir = corrupt("layers5-arrays", [](const std::string& d) {
    edit_json(d + "/summary.json", [](nlohmann::json& j) { j["model"]["layers"] = 5; });
  });
  EXPECT_TRUE(names(read_error(dir), {"summary.json", "saved_bytes_per_block", "model.layers is 5"}));
  // A block index past model.layers in a table.
  dir = corrupt("opblock", [](const std::string& d) { set_cell(d + "/ops.csv", 3, "block", "4"); });
  EXPECT_TRUE(names(read_error(dir), {"ops.csv line 5, column 'block'", "4 is outside -1..3", "model.layers is 4"}));
  dir = corrupt("ledgerblock", [](const std::string& d) { set_cell(d + "/ledger.csv", 0, "block", "-1"); });
  EXPECT_TRUE(names(read_error(dir), {"ledger.csv line 2, column 'block'", "-1 is outside 0..3"}));
  dir = corrupt("eventblock", [](const std::string& d) { set_cell(d + "/memory_events.csv", 7, "block", "12"); });
  EXPECT_TRUE(names(read_error(dir), {"memory_events.csv line 9, column 'block'", "12"}));
}

TEST_F(RunDirValidation, AbsurdLayersAreRefusedAtRead) {
  // What the desktop app ran out of memory on: 10^9 layers.
  std::string dir = corrupt("layers1e9", [](const std::string& d) {
    edit_json(d + "/summary.json", [](nlohmann::json& j) { j["model"]["layers"] = 1000000000; });
  });
  EXPECT_TRUE(names(read_error(dir), {"summary.json", "layers", "1000000000"}));
}

// ------------------------------------------------------------------ enumerations and text

TEST_F(RunDirValidation, EnumColumnsTakeOnlyTheirValues) {
  struct Case {
    const char* file;
    std::size_t row;
    const char* column;
    std::string value;
  };
  const std::string nul("for\0ward", 8);
  const std::vector<Case> cases = {
      {"schedule.csv", 1, "action", "jump"},      {"schedule.csv", 1, "action", nul},
      {"ledger.csv", 0, "decision", "maybe"},     {"ledger.csv", 0, "decision", std::string("kept\0", 5)},
      {"ops.csv", 0, "stream", "gpu"},            {"ops.csv", 0, "phase", "Forward"},
      {"memory_events.csv", 0, "space", "disk"},  {"memory_events.csv", 0, "category", ""},
      {"ledger.csv", 0, "created_phase", nul},    {"schedule.csv", 0, "phase", "forward "},
  };
  int k = 0;
  for (const auto& c : cases) {
    std::string dir = corrupt("enum" + std::to_string(k++), [&](const std::string& d) {
      set_cell(d + "/" + c.file, c.row, c.column, c.value);
    });
    const std::string msg = read_error(dir);
    EXPECT_TRUE(names(msg, {c.file, ("column '" + std::string(c.column) + "'").c_str(), "unknown", "one of"})) << k;
    if (c.value.find('\0') != std::string::npos) EXPECT_TRUE(names(msg, {"\\x00"}));
  }
}

TEST_F(RunDirValidation, TextWithANulOrEmptyNamesIsRefused) {
  std::string dir = corrupt("nultensor", [](const std::string& d) {
    set_cell(d + "/memory_events.csv", 4, "tensor", std::string("att\0n", 5));
  });
  EXPECT_TRUE(names(read_error(dir), {"memory_events.csv line 6, column 'tensor'", "'att\\x00n' holds a NUL"}));
  dir = corrupt("emptyname", [](const std::string& d) { set_cell(d + "/ops.csv", 2, "name", ""); });
  EXPECT_TRUE(names(read_error(dir), {"ops.csv line 4, column 'name': is empty"}));
}

// ------------------------------------------------------------------ row counts

TEST_F(RunDirValidation, RowCountsAreAlwaysChecked) {
  // Without 'files' the cut ops.csv went through.
  std::string dir = corrupt("nofiles", [](const std::string& d) {
    edit_json(d + "/summary.json", [](nlohmann::json& j) { j.erase("files"); });
  });
  EXPECT_TRUE(names(read_error(dir), {"summary.json", "missing field 'files'"}));
  dir = corrupt("noopsentry", [](const std::string& d) {
    edit_json(d + "/summary.json", [](nlohmann::json& j) { j["files"].erase("ops.csv"); });
  });
  EXPECT_TRUE(names(read_error(dir), {"summary.json", "no entry for ops.csv"}));
  // Cut at a row boundary with the count edited to match: the ops no longer add up.
  dir = corrupt("cutops", [](const std::string& d) {
    std::string ops = slurp(d + "/ops.csv");
    std::size_t at = 0;
    for (int line = 0; line < 8; ++line) at = ops.find('\n', at) + 1;
    spit(d + "/ops.csv", ops.substr(0, at));
    edit_json(d + "/summary.json", [](nlohmann::json& j) { j["files"]["ops.csv"]["rows"] = 7; });
  });
  EXPECT_TRUE(names(read_error(dir), {"ops.csv", "flops add up to", "flops.total"}));
  // loss.csv of fewer steps than a complete run has.
  dir = corrupt("cutloss", [](const std::string& d) {
    std::string loss = slurp(d + "/loss.csv");
    spit(d + "/loss.csv", loss.substr(0, loss.rfind('\n', loss.size() - 2) + 1));
    edit_json(d + "/summary.json", [](nlohmann::json& j) { j["files"]["loss.csv"]["rows"] = 2; });
  });
  EXPECT_TRUE(names(read_error(dir), {"loss.csv", "2 steps", "warmup 1 + steps 2"}));
  // schedule.csv without its last action.
  dir = corrupt("cutschedule", [](const std::string& d) {
    std::string s = slurp(d + "/schedule.csv");
    spit(d + "/schedule.csv", s.substr(0, s.rfind('\n', s.size() - 2) + 1));
    edit_json(d + "/summary.json", [&](nlohmann::json& j) { j["files"]["schedule.csv"]["rows"] = rows_of(d + "/schedule.csv"); });
  });
  EXPECT_TRUE(names(read_error(dir), {"schedule.csv", "7 actions, schedule.json has 8"}));
}

// ------------------------------------------------------------------ versions

TEST_F(RunDirValidation, NewerVersionsAreRefusedByName) {
  std::string dir = corrupt("v9", [](const std::string& d) {
    edit_json(d + "/summary.json", [](nlohmann::json& j) { j["format_version"] = 9; });
  });
  const std::string reads = "summary.json: format version 9 is newer than this RematLab reads (" +
                            std::to_string(kTraceFormatVersion) + "); upgrade RematLab";
  EXPECT_TRUE(names(read_error(dir), {reads.c_str()}));
  dir = corrupt("v0", [](const std::string& d) {
    edit_json(d + "/summary.json", [](nlohmann::json& j) { j["format_version"] = 0; });
  });
  EXPECT_TRUE(names(read_error(dir), {"summary.json: format version 0 is not one RematLab wrote"}));
  dir = corrupt("vtext", [](const std::string& d) {
    edit_json(d + "/summary.json", [](nlohmann::json& j) { j["format_version"] = "1"; });
  });
  EXPECT_TRUE(names(read_error(dir), {"summary.json: field 'format_version' must be an integer"}));
  // A column that is not in the version.
  dir = corrupt("extracol", [](const std::string& d) {
    std::string ops = slurp(d + "/ops.csv");
    std::string out;
    for (std::size_t at = 0; at < ops.size();) {
      std::size_t nl = ops.find('\n', at);
      out += ops.substr(at, nl - at) + (at == 0 ? ",gpu_ns\n" : ",0\n");
      at = nl + 1;
    }
    spit(d + "/ops.csv", out);
  });
  const std::string column = "ops.csv: column 'gpu_ns' is not in format version " + std::to_string(kTraceFormatVersion);
  EXPECT_TRUE(names(read_error(dir), {column.c_str()}));
}

TEST_F(RunDirValidation, SummaryFieldsAreCheckedByName) {
  std::string dir = corrupt("nopeak", [](const std::string& d) {
    edit_json(d + "/summary.json", [](nlohmann::json& j) { j.erase("peak_bytes"); });
  });
  EXPECT_TRUE(names(read_error(dir), {"summary.json: missing field 'peak_bytes'"}));
  dir = corrupt("planactions", [](const std::string& d) {
    edit_json(d + "/summary.json", [](nlohmann::json& j) { j["plan"]["actions"] = "eight"; });
  });
  EXPECT_TRUE(names(read_error(dir), {"summary.json: field 'plan.actions' must be a non-negative integer, got \"eight\""}));
  dir = corrupt("warmupneg", [](const std::string& d) {
    edit_json(d + "/summary.json", [](nlohmann::json& j) { j["warmup"] = -1; });
  });
  EXPECT_TRUE(names(read_error(dir), {"summary.json: field 'warmup' is -1, outside 0.."}));
  dir = corrupt("status", [](const std::string& d) {
    edit_json(d + "/summary.json", [](nlohmann::json& j) { j["status"] = "fine"; });
  });
  EXPECT_TRUE(names(read_error(dir), {"summary.json: field 'status' is \"fine\""}));
}

// ------------------------------------------------------------------ not a regular file

TEST_F(RunDirValidation, AFifoAsATableIsRefusedWithoutHanging) {
  for (const char* file : {"ops.csv", "summary.json"}) {
    std::string dir = corrupt(std::string("fifo-") + file, [&](const std::string& d) {
      fs::remove(d + "/" + file);
      ASSERT_EQ(::mkfifo((d + "/" + file).c_str(), 0600), 0);
    });
    auto result = std::async(std::launch::async, [dir] { return read_error(dir); });
    // A reader that blocks on the FIFO is let go by opening its other end, so the test ends.
    if (result.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      ::close(::open((dir + "/" + file).c_str(), O_WRONLY | O_NONBLOCK));
      int fd = ::open((dir + "/" + file).c_str(), O_RDWR);
      ::close(fd);
      ADD_FAILURE() << "reading a run directory with a FIFO as " << file << " blocks";
      result.wait();
      continue;
    }
    EXPECT_TRUE(names(result.get(), {file, "is a FIFO"}));
  }
}

TEST_F(RunDirValidation, ADirectoryOrAnAbsurdlyLargeTableIsRefusedByName) {
  std::string dir = corrupt("dirtable", [](const std::string& d) {
    fs::remove(d + "/ledger.csv");
    fs::create_directory(d + "/ledger.csv");
  });
  EXPECT_TRUE(names(read_error(dir), {"ledger.csv: is a directory, expected a regular file"}));
  // A sparse 1 TiB table: refused by the limit before any allocation.
  dir = corrupt("hugetable", [](const std::string& d) {
    ASSERT_EQ(::truncate((d + "/ops.csv").c_str(), off_t{1} << 40), 0);
  });
  EXPECT_TRUE(names(read_error(dir), {"ops.csv", "1024 GiB is larger than the 16 GiB this reader accepts"}));
}

// ------------------------------------------------------------------ times and bytes in range

TEST_F(RunDirValidation, TimesMustBeOnTheRunClock) {
  const std::string min = std::to_string(std::numeric_limits<std::int64_t>::min());
  std::string dir = corrupt("opmin", [&](const std::string& d) { set_cell(d + "/ops.csv", 0, "start_ns", min); });
  EXPECT_TRUE(names(read_error(dir), {"ops.csv line 2, column 'start_ns'", (min + " is outside 0..").c_str(), "run-clock"}));
  dir = corrupt("schedmin", [&](const std::string& d) { set_cell(d + "/schedule.csv", 3, "start_ns", min); });
  EXPECT_TRUE(names(read_error(dir), {"schedule.csv line 5, column 'start_ns'", min.c_str()}));
  dir = corrupt("schedend", [&](const std::string& d) { set_cell(d + "/schedule.csv", 3, "end_ns", "5"); });
  EXPECT_TRUE(names(read_error(dir), {"schedule.csv line 5, column 'end_ns': 5 is before start_ns"}));
  dir = corrupt("lossfar", [&](const std::string& d) {
    set_cell(d + "/loss.csv", 0, "end_ns", std::to_string(std::numeric_limits<std::int64_t>::max()));
  });
  EXPECT_TRUE(names(read_error(dir), {"loss.csv line 2, column 'end_ns'", "9223372036854775807 is outside"}));
}

TEST_F(RunDirValidation, MemoryDeltasAndLiveBytesStayInRange) {
  const std::string max = std::to_string(std::numeric_limits<std::int64_t>::max());
  std::string dir = corrupt("deltamax", [&](const std::string& d) { set_cell(d + "/memory_events.csv", 1, "delta_bytes", max); });
  EXPECT_TRUE(names(read_error(dir), {"memory_events.csv line 3, column 'delta_bytes'", (max + " is outside").c_str()}));
  // A free of more than is live.
  dir = corrupt("overfree", [&](const std::string& d) { set_cell(d + "/memory_events.csv", 1, "delta_bytes", "-2048"); });
  EXPECT_TRUE(names(read_error(dir), {"memory_events.csv line 3, column 'delta_bytes'", "-2048 frees more than is live"}));
}

TEST_F(RunDirValidation, StepNumbersAreConsistent) {
  std::string dir = corrupt("opstep", [](const std::string& d) { set_cell(d + "/ops.csv", 0, "step", "1"); });
  EXPECT_TRUE(names(read_error(dir), {"ops.csv line 2, column 'step'", "1 is not 2"}));
  dir = corrupt("eventstep", [](const std::string& d) { set_cell(d + "/memory_events.csv", 0, "step", "3"); });
  EXPECT_TRUE(names(read_error(dir), {"memory_events.csv line 2, column 'step'", "3 is outside -1..2"}));
  dir = corrupt("lossorder", [](const std::string& d) { set_cell(d + "/loss.csv", 1, "step", "2"); });
  EXPECT_TRUE(names(read_error(dir), {"loss.csv line 3, column 'step'", "2 is not step 1"}));
  dir = corrupt("counted", [](const std::string& d) { set_cell(d + "/loss.csv", 0, "counted", "1"); });
  EXPECT_TRUE(names(read_error(dir), {"loss.csv line 2, column 'counted'", "warmup step"}));
  dir = corrupt("schedaction", [](const std::string& d) { set_cell(d + "/schedule.csv", 2, "action", "backward"); });
  EXPECT_TRUE(names(read_error(dir), {"schedule.csv line 4, column 'action'", "not action 2 of schedule.json (forward)"}));
}

}  // namespace
}  // namespace remat
