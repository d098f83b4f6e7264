// sweep.json: the runs it lists, and refusals that name the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "core/trace/sweep_file.h"
#include "core/util/error.h"

namespace fs = std::filesystem;

namespace remat {
namespace {

class SweepFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("remat_sweep_file_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
    path_ = (dir_ / kSweepFile).string();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void write(const std::string& s) { std::ofstream(path_, std::ios::binary) << s; }
  std::string refusal() {
    try {
      read_sweep_file(path_);
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  }
  fs::path dir_;
  std::string path_;
};

TEST_F(SweepFile, ListsItsRunsInOrder) {
  write(R"({"format": "rematlab-sweep", "format_version": 1, "runs": [
             {"run": "none", "dir": "none", "policy": "none"},
             {"run": "budget@4MiB", "dir": "budget@4MiB", "policy": "budget"}]})");
  auto runs = read_sweep_file(path_);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].run, "none");
  EXPECT_EQ(runs[1].dir, "budget@4MiB");
}

TEST_F(SweepFile, RefusesWhatIsNotASweepFileNamingIt) {
  EXPECT_EQ(refusal(), path_ + ": missing");
  write(R"({"format": "rematlab-sweep", "runs": [)");
  EXPECT_EQ(refusal().rfind(path_ + ": not valid JSON", 0), 0u) << refusal();
  write(R"({"format": "rematlab-run", "runs": []})");
  EXPECT_EQ(refusal(), path_ + ": not a RematLab sweep file");
  write(R"({"format": 7, "runs": []})");
  EXPECT_EQ(refusal(), path_ + ": not a RematLab sweep file");
  write(R"({"format": "rematlab-sweep", "steps": 1e99999, "runs": []})");
  EXPECT_EQ(refusal().rfind(path_ + ": not valid JSON", 0), 0u) << refusal();
  write(R"({"format": "rematlab-sweep", "runs": [{"run": "none", "dir": 3}]})");
  EXPECT_EQ(refusal(), path_ + ": a run without 'run' and 'dir'");
}

}  // namespace
}  // namespace remat
