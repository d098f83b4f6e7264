// What RematLab deletes or replaces: only its own run and sweep directories, checked by their
// summary's format and version and by what they hold; a finished directory goes into place
// without ever replacing something that appeared meanwhile (the result is kept instead); what
// interrupted writes leave is recognised; export writes only over its own earlier output.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/trace/export_target.h"
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

// A run directory as RematLab writes it (a run with no steps, as a refused run is written).
void write_run(const std::string& dir, const std::string& policy = "none") {
  Trace t;
  t.policy = policy;
  write_run_dir(t, dir, false);
}



// A pid that no process has now: a child that has exited and been reaped.
long dead_pid() {
  pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  int st = 0;
  ::waitpid(p, &st, 0);
  return p;
}

// A temporary directory of `target` holding a result (what a write leaves before its commit).
std::string result_for(const std::string& target, const std::string& marker_text) {
  std::string tmp = make_temp_dir(target);
  spit(tmp + "/" + kSummaryFile, marker_text);
  return tmp;
}

bool has_leftover(const TempDir& d) {
  for (const auto& e : d.entries())
    if (e.find(".tmp-") != std::string::npos || e.find(".old-") != std::string::npos) return true;
  return false;
}

// ------------------------------------------------------------------ what is ours

TEST(OutputDir, ForceNeverReplacesAForeignSummaryWithAUserFileAndNamesTheFile) {
  TempDir d;
  fs::create_directories(d / "proj");
  spit(d / "proj/summary.json", "{}\n");
  spit(d / "proj/thesis.tex", "work");
  std::string err = testing::message_of([&] { write_run_dir(Trace{}, d / "proj", true); });
  EXPECT_NE(err.find("thesis.tex"), std::string::npos) << err;
  EXPECT_NE(err.find("even with --force"), std::string::npos) << err;
  EXPECT_EQ(slurp(d / "proj/thesis.tex"), "work");
  EXPECT_EQ(slurp(d / "proj/summary.json"), "{}\n");
  EXPECT_FALSE(has_leftover(d));
}

TEST(OutputDir, ForceRefusesASummaryOrSweepFileThatIsNotOurs) {
  TempDir d;
  fs::create_directories(d / "a");
  spit(d / "a/summary.json", "{}");
  std::string err = testing::message_of([&] { check_output_dir(d / "a", true); });
  EXPECT_NE(err.find("summary.json"), std::string::npos) << err;
  EXPECT_NE(err.find("rematlab-run"), std::string::npos) << err;
  fs::create_directories(d / "s");
  spit(d / "s/sweep.json", R"({"format": "someone-else", "format_version": 1, "complete": true})");
  spit(d / "s/comparison.csv", "run\n");
  err = testing::message_of([&] { check_output_dir(d / "s", true); });
  EXPECT_NE(err.find("rematlab-sweep"), std::string::npos) << err;
  fs::create_directories(d / "g");
  spit(d / "g/summary.json", "not json at all");
  EXPECT_NE(testing::message_of([&] { check_output_dir(d / "g", true); }).find("not valid JSON"), std::string::npos);
  // Nothing was touched.
  EXPECT_EQ(slurp(d / "a/summary.json"), "{}");
  EXPECT_EQ(slurp(d / "s/comparison.csv"), "run\n");
}

TEST(OutputDir, ANewerFormatVersionOrAMissingCompleteFlagIsNotOurs) {
  TempDir d;
  write_run(d / "run");
  EXPECT_EQ(why_not_ours(d / "run"), "");
  auto j = nlohmann::json::parse(slurp(d / "run/summary.json"));
  j["format_version"] = 99;
  spit(d / "run/summary.json", j.dump());
  std::string why = why_not_ours(d / "run");
  EXPECT_NE(why.find("format version 99"), std::string::npos) << why;
  EXPECT_THROW(check_output_dir(d / "run", true), Error);
  // Past 2^63 a version is unsigned: said as written (it was "-9223372036854775808").
  j["format_version"] = 9223372036854775808ULL;
  spit(d / "run/summary.json", j.dump());
  why = why_not_ours(d / "run");
  EXPECT_NE(why.find("format version 9223372036854775808,"), std::string::npos) << why;
  j["format_version"] = -1;
  spit(d / "run/summary.json", j.dump());
  EXPECT_NE(why_not_ours(d / "run").find("format version -1,"), std::string::npos);
  j["format_version"] = 1;
  j.erase("complete");
  spit(d / "run/summary.json", j.dump());
  EXPECT_NE(why_not_ours(d / "run").find("complete"), std::string::npos);
}

TEST(OutputDir, OurRunWithAStrayFileOrSubdirectoryIsNotOurs) {
  TempDir d;
  write_run(d / "run");
  spit(d / "run/notes.txt", "mine");
  std::string err = testing::message_of([&] { write_run_dir(Trace{}, d / "run", true); });
  EXPECT_NE(err.find("notes.txt"), std::string::npos) << err;
  EXPECT_EQ(slurp(d / "run/notes.txt"), "mine");
  fs::remove(d / "run/notes.txt");
  fs::create_directories(d / "run/sub");
  EXPECT_NE(why_not_ours(d / "run").find("sub"), std::string::npos);
  fs::remove(d / "run/sub");
  EXPECT_EQ(why_not_ours(d / "run"), "");
  // A symbolic link in place of a run directory is not one.
  fs::create_directory_symlink(d / "run", d / "link");
  EXPECT_NE(why_not_ours(d / "link").find("symbolic link"), std::string::npos);
}

TEST(OutputDir, ASweepIsOursOnlyWithOurSweepFileAndRunsOfOurs) {
  TempDir d;
  fs::create_directories(d / "S");
  spit(d / "S/sweep.json", nlohmann::json({{"format", schema::kSweepFormat}, {"format_version", schema::kSweepFormatVersion},
                                           {"complete", true}, {"runs", nlohmann::json::array()}})
                               .dump());
  spit(d / "S/comparison.csv", "run\n");
  write_run(d / "S/none");
  EXPECT_EQ(why_not_ours(d / "S"), "");
  spit(d / "S/none/thesis.tex", "work");
  std::string why = why_not_ours(d / "S");
  EXPECT_NE(why.find("thesis.tex"), std::string::npos) << why;
  fs::remove(d / "S/none/thesis.tex");
  spit(d / "S/thesis.tex", "work");
  EXPECT_NE(why_not_ours(d / "S").find("thesis.tex"), std::string::npos);
  EXPECT_THROW(check_output_dir(d / "S", true), Error);
  EXPECT_EQ(slurp(d / "S/thesis.tex"), "work");
}

TEST(OutputDir, AnEmptyDirectoryMayBeReplacedWithForceOnly) {
  TempDir d;
  fs::create_directories(d / "empty");
  EXPECT_NE(testing::message_of([&] { check_output_dir(d / "empty", false); }).find("--force"), std::string::npos);
  EXPECT_NO_THROW(check_output_dir(d / "empty", true));
  write_run_dir(Trace{}, d / "empty", true);
  EXPECT_EQ(why_not_ours(d / "empty"), "");
  EXPECT_TRUE(fs::exists(d / "empty/summary.json"));
}

TEST(OutputDir, AnEmptyNameIsRefused) {
  EXPECT_NE(testing::message_of([] { check_output_dir("", false); }).find("empty"), std::string::npos);
  EXPECT_THROW(write_run_dir(Trace{}, "", false), Error);
}

// ------------------------------------------------------------------ moving into place

class Commit : public ::testing::TestWithParam<bool> {
 protected:
  CommitSeams seams() const {
    CommitSeams s;
    s.two_step = GetParam();
    return s;
  }
};

TEST_P(Commit, ForceReplacesOurRunAndLeavesNothingBehind) {
  TempDir d;
  write_run(d / "run", "none");
  check_output_dir(d / "run", true);
  std::string tmp = make_temp_dir(d / "run");
  write_run(d / "new", "selective");
  for (const auto& e : fs::directory_iterator(d / "new")) fs::copy(e.path(), tmp + "/" + e.path().filename().string());
  commit_temp_dir(tmp, d / "run", true, seams());
  EXPECT_EQ(d.entries(), (std::vector<std::string>{"new", "run"}));
  EXPECT_FALSE(fs::exists(d / "run/" + std::string(kWritingMarkerFile)));
  EXPECT_EQ(why_not_ours(d / "run"), "");
}

TEST_P(Commit, WithoutForceATargetCreatedMeanwhileIsNeverReplacedAndTheResultIsKept) {
  TempDir d;
  check_output_dir(d / "victim", false);
  std::string tmp = result_for(d / "victim", "ours");
  // Something else creates the target between the check and the commit.
  fs::create_directories(d / "victim");
  spit(d / "victim/theirs.txt", "their data");
  std::string err = testing::message_of([&] { commit_temp_dir(tmp, d / "victim", false, seams()); });
  EXPECT_EQ(slurp(d / "victim/theirs.txt"), "their data");
  EXPECT_NE(err.find("appeared"), std::string::npos) << err;
  EXPECT_NE(err.find(d / "victim-2"), std::string::npos) << err;
  EXPECT_EQ(slurp(d / "victim-2/summary.json"), "ours");
  EXPECT_FALSE(has_leftover(d));
}

TEST_P(Commit, ATargetCreatedRightBeforeTheRenameIsNeverReplaced) {
  TempDir d;
  std::string tmp = result_for(d / "victim", "ours");
  CommitSeams s = seams();
  s.before_rename = [&] {
    fs::create_directories(d / "victim");
    spit(d / "victim/theirs.txt", "their data");
  };
  std::string err = testing::message_of([&] { commit_temp_dir(tmp, d / "victim", false, s); });
  EXPECT_EQ(slurp(d / "victim/theirs.txt"), "their data");
  EXPECT_NE(err.find("victim-2"), std::string::npos) << err;
  EXPECT_EQ(slurp(d / "victim-2/summary.json"), "ours");
}

TEST_P(Commit, WithForceATargetThatIsNoLongerOursIsNotReplaced) {
  TempDir d;
  write_run(d / "victim");
  check_output_dir(d / "victim", true);
  std::string tmp = result_for(d / "victim", "ours");
  // Between the check and the commit the user puts their own directory there.
  fs::remove_all(d / "victim");
  fs::create_directories(d / "victim");
  spit(d / "victim/thesis.tex", "work");
  std::string err = testing::message_of([&] { commit_temp_dir(tmp, d / "victim", true, seams()); });
  EXPECT_NE(err.find("thesis.tex"), std::string::npos) << err;
  EXPECT_EQ(slurp(d / "victim/thesis.tex"), "work");
  EXPECT_EQ(slurp(d / "victim-2/summary.json"), "ours");
  EXPECT_FALSE(has_leftover(d));
}

TEST_P(Commit, WithForceTheOldContentsAreCheckedAgainBeforeTheyAreDeleted) {
  TempDir d;
  write_run(d / "victim");
  std::string tmp = result_for(d / "victim", "ours");
  CommitSeams s = seams();
  // After the check of the target and before it moves, it is swapped for the user's.
  s.before_rename = [&] {
    fs::remove_all(d / "victim");
    fs::create_directories(d / "victim");
    spit(d / "victim/thesis.tex", "work");
  };
  std::string err = testing::message_of([&] { commit_temp_dir(tmp, d / "victim", true, s); });
  EXPECT_NE(err.find("thesis.tex"), std::string::npos) << err;
  EXPECT_NE(err.find("put back"), std::string::npos) << err;
  EXPECT_EQ(slurp(d / "victim/thesis.tex"), "work");
  EXPECT_EQ(slurp(d / "victim-2/summary.json"), "ours");
  EXPECT_FALSE(has_leftover(d));
}

INSTANTIATE_TEST_SUITE_P(NativeAndTwoStep, Commit, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? "TwoStep" : "Native"; });

TEST(OutputDir, ARunWhoseTargetAppearedWhileItRanIsKeptNextToIt) {
  TempDir d;
  check_output_dir(d / "run", false);  // before the run
  fs::create_directories(d / "run");   // during it
  spit(d / "run/theirs.txt", "their data");
  Trace t;
  t.policy = "selective";
  std::string err = testing::message_of([&] { write_run_dir(t, d / "run", false, true); });
  EXPECT_NE(err.find(d / "run-2"), std::string::npos) << err;
  EXPECT_EQ(slurp(d / "run/theirs.txt"), "their data");
  // The kept result is this run's (an empty trace, so its summary is read, not the whole run).
  EXPECT_EQ(read_json_file(d / "run-2/summary.json")["policy"], "selective");
  EXPECT_FALSE(has_leftover(d));
}

TEST(OutputDir, AWriteThatFailsBeforeItsCommitLeavesNothing) {
  TempDir d;
  fs::create_directories(d / "parent");
  spit(d / "file", "x");
  EXPECT_THROW(write_run_dir(Trace{}, d / "file/run", false), Error);
  EXPECT_EQ(slurp(d / "file"), "x");
  EXPECT_FALSE(has_leftover(d));
}

// ------------------------------------------------------------------ leftovers

TEST(Leftovers, NamesAreParsedAndNothingElseIsOne) {
  auto l = parse_leftover("/x/runs/.victim.tmp-1234-56");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->target, "/x/runs/victim");
  EXPECT_EQ(l->pid, 1234);
  auto o = parse_leftover("runs/.a.b.old-77-8/");
  ASSERT_TRUE(o);
  EXPECT_EQ(o->target, "runs/a.b");
  EXPECT_EQ(o->pid, 77);
  for (const char* not_one : {"runs/victim", "runs/.victim", "runs/.tmp-1-2", "runs/.v.tmp-12", "runs/.v.tmp-a-1",
                              "runs/v.tmp-1-2", "runs/.plot.tmp-12.png", "runs/notes.txt.tmp-12",
                              "runs/w.partial-x", "runs/rematlab-dp-", "runs/rematlab-dp-x"})
    EXPECT_FALSE(parse_leftover(not_one)) << not_one;
}

TEST(Leftovers, AnInterruptedWriteIsFoundAndOnlyOursOfADeadProcessMayBeRemoved) {
  TempDir d;
  write_run(d / "victim");
  const long gone = dead_pid();
  ASSERT_FALSE(process_alive(gone));
  EXPECT_TRUE(process_alive(::getpid()));
  // A kill at the final step: the new result and the old directory, both complete.
  const std::string tmp = d / (".victim.tmp-" + std::to_string(gone) + "-1");
  const std::string old = d / (".victim.old-" + std::to_string(gone) + "-2");
  fs::copy(d / "victim", tmp);
  fs::copy(d / "victim", old);
  // A write killed halfway: the marker and some tables.
  const std::string half = d / (".other.tmp-" + std::to_string(gone) + "-3");
  fs::rename(make_temp_dir(d / "other"), half);
  spit(half + "/ops.csv", "start_ns\n");
  // One of a process still running, and a user's directory that only looks like a leftover.
  const std::string live = d / (".victim.tmp-" + std::to_string(::getpid()) + "-4");
  fs::copy(d / "victim", live);
  const std::string user = d / (".victim.tmp-" + std::to_string(gone) + "-5");
  fs::create_directories(user);
  spit(user + "/thesis.tex", "work");

  auto around = leftovers_around(d / "victim");
  std::vector<std::string> paths;
  for (const auto& l : around) paths.push_back(l.path);
  std::vector<std::string> want = {tmp, old, live, user};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(paths, want);
  EXPECT_EQ(leftovers_in(d.path().string()).size(), 5u);  // and other's
  for (const auto& l : around) {
    const std::string why = why_keep(l);
    if (l.path == live) EXPECT_NE(why.find("still running"), std::string::npos) << why;
    else if (l.path == user) EXPECT_NE(why.find("thesis.tex"), std::string::npos) << why;
    else EXPECT_EQ(why, "") << l.path;
    EXPECT_NE(describe(l).find(l.path), std::string::npos);
  }
  EXPECT_EQ(why_keep(*parse_leftover(half)), "");
  spit(half + "/thesis.tex", "work");
  EXPECT_NE(why_keep(*parse_leftover(half)).find("thesis.tex"), std::string::npos);
}

TEST(Leftovers, AnInterruptedSweepIsOursAndIsRemovedWholeAndWhatADeletionLeavesStaysOurs) {
  TempDir d;
  // A sweep killed while its second run was being written.
  std::string tmp = make_temp_dir(d / "S", OutputKind::Sweep);
  write_run(tmp + "/none");
  std::string inner = make_temp_dir(tmp + "/selective");
  spit(inner + "/ops.csv", "start_ns\n");
  EXPECT_EQ(why_not_ours(tmp), "");
  auto l = parse_leftover(tmp);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->target, d / "S");
  spit(inner + "/thesis.tex", "work");
  EXPECT_NE(why_not_ours(tmp).find("thesis.tex"), std::string::npos);
  fs::remove(inner + "/thesis.tex");
  remove_ours(tmp);
  EXPECT_TRUE(d.entries().empty());
  // A run deleted halfway, as remove_ours leaves it: marked, its summary gone, some tables left.
  write_run(d / "run");
  std::string half = d / ".run.tmp-1-1";
  fs::rename(d / "run", half);
  spit(half + "/" + kWritingMarkerFile, nlohmann::json({{"format", schema::kRunFormat}, {"format_version", 1}}).dump());
  fs::remove(half + "/" + kSummaryFile);
  EXPECT_EQ(why_not_ours(half), "");
}

// ------------------------------------------------------------------ export

TEST(ExportTarget, AnExistingFileIsReplacedOnlyWithForceAndOnlyWhenItIsOurTrace) {
  TempDir d;
  write_run(d / "run");
  write_chrome_trace(Trace{}, d / "old.json");
  EXPECT_TRUE(is_our_chrome_trace(d / "old.json"));
  EXPECT_NO_THROW(check_export_file(d / "run", d / "new.json", false));
  EXPECT_NE(testing::message_of([&] { check_export_file(d / "run", d / "old.json", false); }).find("--force"), std::string::npos);
  EXPECT_NO_THROW(check_export_file(d / "run", d / "old.json", true));
  spit(d / "notes.json", "{\"mine\": 1}");
  EXPECT_NE(testing::message_of([&] { check_export_file(d / "run", d / "notes.json", true); }).find("not a Chrome trace"),
            std::string::npos);
  // Its own trace.json always; anything else in a run directory never.
  EXPECT_NO_THROW(check_export_file(d / "run", d / "run/trace.json", false));
  EXPECT_THROW(check_export_file(d / "run", d / "run/other.json", true), Error);
  write_run(d / "another");
  std::string err = testing::message_of([&] { check_export_file(d / "run", d / "another/trace.json", true); });
  EXPECT_NE(err.find("another"), std::string::npos) << err;
  EXPECT_THROW(check_export_file(d / "run", d / "another/summary.json", true), Error);
  EXPECT_THROW(check_export_file(d / "run", "", true), Error);
}

TEST(ExportTarget, CsvGoesIntoANewDirectoryOrOverAnEarlierExportOnly) {
  TempDir d;
  write_run(d / "run");
  EXPECT_NO_THROW(check_export_dir(d / "run", d / "run", false));
  EXPECT_NO_THROW(check_export_dir(d / "run", d / "fresh", false));
  fs::create_directories(d / "tables");
  write_csv_tables(Trace{}, d / "tables");
  EXPECT_NE(testing::message_of([&] { check_export_dir(d / "run", d / "tables", false); }).find("--force"), std::string::npos);
  EXPECT_NO_THROW(check_export_dir(d / "run", d / "tables", true));
  spit(d / "tables/thesis.tex", "work");
  std::string err = testing::message_of([&] { check_export_dir(d / "run", d / "tables", true); });
  EXPECT_NE(err.find("thesis.tex"), std::string::npos) << err;
  // Never into another run directory (its CSVs would no longer match its summary), nor below one.
  write_run(d / "another");
  EXPECT_NE(testing::message_of([&] { check_export_dir(d / "run", d / "another", true); }).find("another"), std::string::npos);
  EXPECT_THROW(check_export_dir(d / "run", d / "another/sub", true), Error);
  EXPECT_THROW(check_export_dir(d / "run", d / "run/sub", true), Error);
  spit(d / "file.csv", "x");
  EXPECT_THROW(check_export_dir(d / "run", d / "file.csv", true), Error);
}

}  // namespace
}  // namespace remat
