// The one way RematLab writes a file (core/util/output_file.h): a temporary file of ours next to
// the target, every write and the close checked, renamed over nothing but a regular file with
// one link that is none of the command's inputs. Nothing is opened at the target, so a FIFO never
// blocks and a device is never written; what fails leaves no temporary file.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/trace/csv.h"
#include "core/util/error.h"
#include "core/util/output_file.h"
#include "test_files.h"

namespace fs = std::filesystem;

namespace remat {
namespace {

using testing::message_of;
using testing::slurp;
using testing::spit;
using testing::TempDir;

bool has_temp(const TempDir& d) {
  for (const auto& e : d.entries())
    if (e.find(".tmp-") != std::string::npos) return true;
  return false;
}

TEST(OutputFile, WritesANewFileAndReplacesARegularOneLeavingNoTemporaryFile) {
  TempDir d;
  write_output_file(d / "a.bin", "first");
  EXPECT_EQ(slurp(d / "a.bin"), "first");
  write_output_file(d / "a.bin", "second");
  EXPECT_EQ(slurp(d / "a.bin"), "second");
  EXPECT_EQ(d.entries(), std::vector<std::string>{"a.bin"});
  {
    OutputFile f(d / "b.bin");
    f.write("unfinished");
    EXPECT_TRUE(has_temp(d));
  }  // not committed: removed
  EXPECT_EQ(d.entries(), std::vector<std::string>{"a.bin"});
}

TEST(OutputFile, NeverReplacesAFifoADeviceADirectoryALinkOrASocketAndNeverWaits) {
  TempDir d;
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0600), 0);
  fs::create_directories(d / "dir");
  fs::create_symlink(d / "dir", d / "link");
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = d / "sock";
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ::alarm(30);  // a write that opened the FIFO would wait for a reader forever
  const std::pair<std::string, const char*> cases[] = {
      {d / "fifo", "a FIFO"}, {"/dev/null", "a character device"}, {d / "dir", "a directory"},
      {d / "link", "a symbolic link"}, {sock, "a socket"}};
  for (const auto& c : cases) {
    const std::string& path = c.first;  // (clang 14 cannot capture a structured binding)
    const char* kind = c.second;
    const std::string err = message_of([&] { write_output_file(path, "x", {}, "--save-weights"); });
    EXPECT_NE(err.find(kind), std::string::npos) << path << ": " << err;
    EXPECT_NE(err.find("--save-weights"), std::string::npos) << err;
    EXPECT_NE(err.find(path), std::string::npos) << err;
  }
  ::alarm(0);
  ::close(s);
  struct stat st;
  ASSERT_EQ(::lstat((d / "fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(::lstat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_TRUE(fs::is_symlink(d / "link"));
  EXPECT_FALSE(has_temp(d));
}

TEST(OutputFile, NeverReplacesAnInputOrAFileWithASecondName) {
  TempDir d;
  spit(d / "tokens.bin", "tokens");
  InputFiles in;
  in.add(d / "tokens.bin", "--tokens");
  in.add(d / "missing.bin", "--corpus");  // adds nothing
  EXPECT_EQ(in.files.size(), 1u);
  // The same file under another name is still the input (compared by device and inode).
  fs::create_directories(d / "sub");
  const std::string other_name = d / "sub/../tokens.bin";
  std::string err = message_of([&] { write_output_file(other_name, "batch", in, "--dump-batch"); });
  EXPECT_NE(err.find("--tokens"), std::string::npos) << err;
  EXPECT_EQ(slurp(d / "tokens.bin"), "tokens");
  spit(d / "notes.txt", "mine");
  fs::create_hard_link(d / "notes.txt", d / "w.safetensors");
  err = message_of([&] { write_output_file(d / "w.safetensors", "weights"); });
  EXPECT_NE(err.find("2 links"), std::string::npos) << err;
  EXPECT_EQ(slurp(d / "notes.txt"), "mine");
  EXPECT_FALSE(has_temp(d));
  err = message_of([&] { write_output_file(d / "no-such-dir/w.bin", "weights"); });
  EXPECT_NE(err.find("does not exist"), std::string::npos) << err;
}

TEST(OutputFile, WhatTakesTheNameWhileTheFileIsWrittenIsCheckedAgainAtTheCommit) {
  TempDir d;
  OutputFile f(d / "out.bin");
  f.write("data");
  ASSERT_EQ(::mkfifo((d / "out.bin").c_str(), 0600), 0);
  const std::string err = message_of([&] { f.commit(); });
  EXPECT_NE(err.find("a FIFO"), std::string::npos) << err;
  struct stat st;
  ASSERT_EQ(::lstat((d / "out.bin").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_FALSE(has_temp(d));
}

TEST(OutputFile, AWriteThatDoesNotFitFailsNamingTheFileAndLeavesNothing) {
  TempDir d;
  const std::string path = d / "big.npy";
  // A file size limit (as a full disk does) in a child process: the write must fail, not end
  // with part of the file in place.
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    const std::string err = message_of([&] {
      OutputFile f(path, {}, "--dump-batch");
      f.write(std::string(1 << 16, 'x'));
      f.commit();
    });
    const bool named = err.find("--dump-batch") != std::string::npos && err.find(path) != std::string::npos &&
                       err.find("large") != std::string::npos;
    ::_exit(named && !fs::exists(path) ? 0 : 1);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
  EXPECT_FALSE(has_temp(d));
  EXPECT_FALSE(fs::exists(path));
}

TEST(OutputFile, CsvFilesGoThroughItToo) {
  TempDir d;
  ASSERT_EQ(::mkfifo((d / "trace.json").c_str(), 0600), 0);
  const std::string err = message_of([&] {
    csv::OutFile f(d / "trace.json");
    f.write("{}");
    f.commit();
  });
  EXPECT_NE(err.find("a FIFO"), std::string::npos) << err;
  EXPECT_FALSE(has_temp(d));
}

}  // namespace
}  // namespace remat
