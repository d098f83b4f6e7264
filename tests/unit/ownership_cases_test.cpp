// One rule for what RematLab may delete or replace, shared by the C++ writer and the Python
// recorder: the cases of tests/data/ownership/cases.json, judged here by why_not_ours and in
// tests/e2e/ownership_e2e.py by python/rematlab/output_dir.py. Also what deleting or replacing
// a directory does to a file that has a second name elsewhere: nothing.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/trace/output_dir.h"
#include "core/trace/run_dir.h"
#include "core/util/error.h"
#include "core/util/json_io.h"
#include "test_files.h"

namespace fs = std::filesystem;

namespace remat {
namespace {

using testing::slurp;
using testing::spit;
using testing::TempDir;

std::string from_hex(const std::string& h) {
  std::string out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

// The text of a file entry of the cases (anything but fifo, symlink, hardlink and dir).
std::string text_of(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.contains("json")) return v["json"].dump();
  if (v.contains("raw")) return v["raw"].get<std::string>();
  if (v.contains("hex")) return from_hex(v["hex"].get<std::string>());
  throw Error("ownership case: unknown entry " + v.dump());
}

// Builds `tree` in `dir`; a hard link's other name goes into `outside`.
void build(const fs::path& dir, const nlohmann::json& tree, const fs::path& outside) {
  fs::create_directories(dir);
  for (const auto& [name, v] : tree.items()) {
    const fs::path p = dir / name;
    if (v.is_object() && v.contains("dir")) {
      build(p, v["dir"], outside);
    } else if (v.is_object() && v.contains("fifo")) {
      ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0) << p;
    } else if (v.is_object() && v.contains("symlink")) {
      fs::create_symlink(v["symlink"].get<std::string>(), p);
    } else if (v.is_object() && v.contains("hardlink")) {
      const fs::path other = outside / ("user-" + std::to_string(std::hash<std::string>{}(p.string())));
      spit(other.string(), text_of(v["hardlink"]));
      fs::create_hard_link(other, p);
    } else {
      spit(p.string(), text_of(v));
    }
  }
}

TEST(OwnershipCases, EveryCaseIsJudgedAsTheSharedTableSays) {
  const nlohmann::json cases = read_json_file(std::string(REMAT_TEST_DATA_DIR) + "/ownership/cases.json");
  ASSERT_GE(cases["cases"].size(), 30u);
  // A reader that waited on a FIFO would hang the test: it fails instead.
  ::alarm(60);
  int n = 0;
  for (const auto& c : cases["cases"]) {
    TempDir d;
    fs::create_directories(d.path() / "outside");
    build(d.path() / "case", c["tree"], d.path() / "outside");
    const std::string why = why_not_ours((d.path() / "case").string());
    const std::string name = c["name"].get<std::string>();
    EXPECT_EQ(why.empty(), c["ours"].get<bool>()) << name << ": " << why;
    if (c.contains("names")) EXPECT_NE(why.find(c["names"].get<std::string>()), std::string::npos) << name << ": " << why;
    ++n;
  }
  ::alarm(0);
  EXPECT_EQ(n, static_cast<int>(cases["cases"].size()));
}

// A run directory as RematLab writes it.
void write_empty_run(const std::string& dir) { write_run_dir(Trace{}, dir, false); }

TEST(OwnershipCases, ForceAndCleanNeverWriteThroughAHardLinkedMarkerOrFile) {
  TempDir d;
  spit(d / "notes.txt", "the user's notes");
  write_empty_run(d / "run");
  fs::create_hard_link(d / "notes.txt", d.path() / "run" / kWritingMarkerFile);
  std::string err = testing::message_of([&] { check_output_dir(d / "run", true); });
  EXPECT_NE(err.find("links"), std::string::npos) << err;
  EXPECT_THROW(write_run_dir(Trace{}, d / "run", true), Error);
  EXPECT_EQ(slurp(d / "notes.txt"), "the user's notes");
  // The leftover of an interrupted write whose marker is such a link is not ours either.
  const std::string left = d / ".run.tmp-999999999-1";
  fs::rename(d / "run", left);
  EXPECT_NE(why_keep(*parse_leftover(left)).find("links"), std::string::npos);
  EXPECT_EQ(slurp(d / "notes.txt"), "the user's notes");
}

TEST(OwnershipCases, RemovingOurDirectoryWritesANewMarkerAndLeavesOtherNamesAlone) {
  TempDir d;
  write_empty_run(d / "run");
  // What a deletion does with a marker already there: a new file, never a write through it
  // (checked separately from why_not_ours, which would refuse the link in the first place).
  spit(d / "notes.txt", "the user's notes");
  fs::create_hard_link(d / "notes.txt", d.path() / "run" / kWritingMarkerFile);
  remove_ours(d / "run");
  EXPECT_FALSE(fs::exists(d / "run"));
  EXPECT_EQ(slurp(d / "notes.txt"), "the user's notes");
  EXPECT_EQ(fs::hard_link_count(d / "notes.txt"), 1u);
}

TEST(OwnershipCases, ARecordingIsOursAndForceReplacesIt) {
  TempDir d;
  write_empty_run(d / "rec");
  for (const char* f : {"saved_tensors.csv", "module_calls.csv", "op_outputs.csv"}) spit((d.path() / "rec" / f).string(), "id\n");
  EXPECT_EQ(why_not_ours(d / "rec"), "");
  write_run_dir(Trace{}, d / "rec", true);
  EXPECT_FALSE(fs::exists(d / "rec/saved_tensors.csv"));
  EXPECT_TRUE(fs::exists(d.path() / "rec" / kSummaryFile));
}

}  // namespace
}  // namespace remat
