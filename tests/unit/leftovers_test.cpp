// Every leftover of an interrupted write is one `clean` knows: the temporary file of a file being
// written (and those of earlier versions: a run's `trace.json.tmp-PID`, weights'
// `w.safetensors.partial-PID`), and a killed launcher's rendezvous directory `rematlab-dp-PID`;
// each deleted only when its process is gone and it is ours by name, kind, links and content.
#include <gtest/gtest.h>

#include <filesystem>
#include <sys/wait.h>
#include <unistd.h>

#include "core/trace/output_dir.h"
#include "core/trace/run_dir.h"
#include "test_files.h"

namespace fs = std::filesystem;

namespace remat {
namespace {

using testing::slurp;
using testing::spit;
using testing::TempDir;

const std::string kDead = "999999999";  // past any pid this machine gives

TEST(Leftovers, TheTemporaryFilesOfFilesAreLeftoversOfTheFileTheyWereFor) {
  auto n = parse_leftover("/x/.w.safetensors.tmp-" + kDead + "-7");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->target, "/x/w.safetensors");
  EXPECT_EQ(n->pid, 999999999);
  auto t = parse_leftover("/x/run/trace.json.tmp-1234");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->kind, Leftover::Kind::File);
  EXPECT_EQ(t->target, "/x/run/trace.json");
  EXPECT_EQ(t->pid, 1234);
  auto p = parse_leftover("/x/w.safetensors.partial-77");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->target, "/x/w.safetensors");
  EXPECT_EQ(p->pid, 77);
  ASSERT_TRUE(parse_leftover("/x/w.safetensors.partial-77-2"));
  auto s = parse_leftover("/tmp/rematlab-dp-4242/");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, Leftover::Kind::Scratch);
  EXPECT_EQ(s->pid, 4242);
}

TEST(Leftovers, AFileLeftoverIsRemovedOnlyWhenItIsALoneFileOfOursOfADeadProcess) {
  TempDir d;
  write_run_dir(Trace{}, d / "run", false);
  const std::string trace_tmp = d / ("run/trace.json.tmp-" + kDead);
  spit(trace_tmp, "{\"traceEv");
  const std::string weights = d / ("w.safetensors.partial-" + kDead);
  spit(weights, std::string("\x10\0\0\0\0\0\0\0{\"a\"", 12));
  const std::string new_tmp = d / (".w.safetensors.tmp-" + kDead + "-3");
  spit(new_tmp, "half");
  const std::string user = d / ("notes.txt.partial-" + kDead);
  spit(user, "my notes, not weights");
  const std::string linked = d / (".grads.safetensors.tmp-" + kDead + "-4");
  spit(d / "keep.bin", "mine");
  fs::create_hard_link(d / "keep.bin", linked);
  const std::string live = d / (".w.safetensors.tmp-" + std::to_string(::getpid()) + "-5");
  spit(live, "being written");

  auto in_run = leftovers_around(d / "run");
  ASSERT_EQ(in_run.size(), 1u);
  EXPECT_EQ(in_run[0].path, trace_tmp);
  EXPECT_EQ(why_keep(in_run[0]), "");
  for (const auto& l : leftovers_in(d.path().string())) {
    const std::string why = why_keep(l);
    if (l.path == user) EXPECT_NE(why.find("safetensors"), std::string::npos) << why;
    else if (l.path == linked) EXPECT_NE(why.find("links"), std::string::npos) << why;
    else if (l.path == live) EXPECT_NE(why.find("still running"), std::string::npos) << why;
    else EXPECT_EQ(why, "") << l.path;
    if (why.empty()) remove_leftover(l);
  }
  remove_leftover(in_run[0]);
  EXPECT_FALSE(fs::exists(trace_tmp));
  EXPECT_FALSE(fs::exists(weights));
  EXPECT_FALSE(fs::exists(new_tmp));
  EXPECT_EQ(slurp(user), "my notes, not weights");
  EXPECT_EQ(slurp(d / "keep.bin"), "mine");
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(d.path() / "run" / "summary.json"));
}

TEST(Leftovers, AKilledLaunchersDirectoryIsOursOnlyWithNothingButItsRendezvousAndItsRun) {
  TempDir d;
  const std::string scratch = d / ("rematlab-dp-" + kDead);
  fs::create_directories(scratch + "/store");
  spit(scratch + "/store/1234567890123", "addresses");
  spit(scratch + "/store/.987654321", "half");
  spit(scratch + "/store/rematlab-pp-0-0.nccl-id", "id");
  const std::string staging = make_temp_dir(scratch + "/run", OutputKind::Ranks);
  const auto l = parse_leftover(scratch);
  ASSERT_TRUE(l);
  EXPECT_EQ(why_keep(*l), "");
  EXPECT_NE(describe(*l).find("rendezvous"), std::string::npos);
  spit(scratch + "/store/thesis.tex", "work");
  EXPECT_NE(why_keep(*l).find("thesis.tex"), std::string::npos);
  fs::remove(scratch + "/store/thesis.tex");
  spit(scratch + "/notes.txt", "mine");
  EXPECT_NE(why_keep(*l).find("notes.txt"), std::string::npos);
  fs::remove(scratch + "/notes.txt");
  remove_leftover(*l);
  EXPECT_FALSE(fs::exists(scratch));
}

TEST(Leftovers, ANameThatDoesNotExistFindsTheLeftoversOfWritingIt) {
  TempDir d;
  const std::string tmp = make_temp_dir(d / "never-finished");
  const auto found = leftovers_around(d / "never-finished");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].path, tmp);
  EXPECT_TRUE(leftovers_around(d / "something-else").empty());
}

}  // namespace
}  // namespace remat
