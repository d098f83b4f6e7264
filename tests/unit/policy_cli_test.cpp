// A schedule is also a file: `rematlab-batch plan --json` (no training run) prints the
// prediction with the schedule, and `run --schedule FILE` runs it back, validated first.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/schedule/schedule.h"
#include "policy_test_util.h"

namespace fs = std::filesystem;

namespace remat {
namespace {

struct Result {
  int status;
  std::string out;
};

Result sh(const std::string& args) {
  std::string cmd = std::string(REMAT_BUILD_DIR) + "/bin/rematlab-batch " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  Result r{-1, ""};
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  r.status = ::pclose(p);
  return r;
}

class PolicyCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("remat_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(PolicyCli, PlanJsonRoundTripsIntoRunSchedule) {
  const std::string model = "--model tiny --layers 3 --seq 16 --batch 1";
  for (const std::string p : {"selective", "uniform:segments=3", "revolve:snapshots=2",
                              "offload:what=checkpoints"}) {
    SCOPED_TRACE(p);
    Result plan = sh("plan " + model + " --policy " + p + " --json");
    ASSERT_EQ(plan.status, 0) << plan.out;
    nlohmann::json j = nlohmann::json::parse(plan.out);
    for (const char* k : {"predicted_peak_bytes", "block_forwards", "recompute_flops", "actions"})
      EXPECT_TRUE(j.contains(k)) << k;
    EXPECT_GT(j["actions"].size(), 0u);
    const fs::path file = dir_ / "plan.json";
    std::ofstream(file) << plan.out;
    // The file is the same schedule the policy made.
    Schedule back = load_schedule_file(file.string());
    EXPECT_EQ(back.actions.size(), j["actions"].size());
    EXPECT_EQ(back.checkpoint_slots, j["schedule"]["checkpoint_slots"].get<int>());
    EXPECT_EQ(schedule_to_json(back)["actions"], j["actions"]);
    // Running the file is running the policy.
    Result a = sh("run " + model + " --steps 1 --warmup 0 --json --schedule " + file.string());
    Result b = sh("run " + model + " --steps 1 --warmup 0 --json --policy " + p);
    ASSERT_EQ(a.status, 0) << a.out;
    ASSERT_EQ(b.status, 0) << b.out;
    nlohmann::json ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
    EXPECT_EQ(ja["grad_checksum"], jb["grad_checksum"]);
    EXPECT_EQ(ja["loss"], jb["loss"]);
    EXPECT_EQ(ja["block_forwards"], j["block_forwards"]);
  }
}

TEST_F(PolicyCli, AnEditedIllegalScheduleIsRefusedBeforeRunning) {
  const std::string model = "--model tiny --layers 3 --seq 16 --batch 1";
  Result plan = sh("plan " + model + " --policy uniform:segments=3 --json");
  ASSERT_EQ(plan.status, 0) << plan.out;
  nlohmann::json j = nlohmann::json::parse(plan.out)["schedule"];
  // Drop the recompute of block 1: its backward would need tensors it no longer holds.
  auto& acts = j["actions"];
  for (std::size_t i = 0; i < acts.size(); ++i)
    if (acts[i]["action"] == "recompute" && acts[i]["block"] == 1) {
      acts.erase(i);
      break;
    }
  const fs::path file = dir_ / "edited.json";
  std::ofstream(file) << j.dump(1);
  Result r = sh("run " + model + " --steps 1 --warmup 0 --schedule " + file.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("recompute it first"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace remat
