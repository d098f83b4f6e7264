// Broken plugins, built by the test suite into their own directory (tests/plugins), are
// rejected or reported with their file and the reason, and everything else keeps working.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "core/plugin/registry.h"
#include "core/util/error.h"
#include "plugin_test_util.h"
#include "policy_test_util.h"

namespace fs = std::filesystem;

namespace remat {
namespace {

using test::error_of;
using test::kBroken;
using test::kPlugins;
using test::rejected;

TEST(PolicyRegistry, LoadsEveryShippedPolicy) {
  PolicyRegistry r;
  r.load_dirs({kPlugins});
  EXPECT_TRUE(r.rejected().empty());
  for (const char* n : {"none", "selective", "uniform", "block", "revolve", "offload", "budget"})
    EXPECT_NE(r.find(n), nullptr) << n;
}

TEST(PolicyRegistry, RejectsBrokenLibrariesWithFileAndReason) {
  PolicyRegistry r;
  r.load_dirs({kPlugins, kBroken});
  const RejectedPlugin* x = rejected(r, "not_a_plugin.so");
  ASSERT_NE(x, nullptr);
  EXPECT_NE(x->reason.find("not a RematLab policy plugin"), std::string::npos) << x->reason;
  x = rejected(r, "wrong_abi.so");
  ASSERT_NE(x, nullptr);
  EXPECT_NE(x->reason.find("ABI version 999"), std::string::npos) << x->reason;
  x = rejected(r, "duplicate_none.so");
  ASSERT_NE(x, nullptr);
  EXPECT_NE(x->reason.find("duplicates policy 'none'"), std::string::npos) << x->reason;
  EXPECT_NE(x->reason.find(kPlugins), std::string::npos) << x->reason;  // names the winner
  x = rejected(r, "factory_throws.so");
  ASSERT_NE(x, nullptr);
  EXPECT_NE(x->reason.find("cannot start: no configuration"), std::string::npos) << x->reason;
  for (const char* f : {"description_throws.so", "bad_name.so", "bad_param_name.so", "static_init_crash.so",
                        "probe_nested.so"})
    EXPECT_NE(rejected(r, f), nullptr) << f;  // each has its own test (policy_isolation_test.cpp)
  EXPECT_EQ(r.rejected().size(), 9u);
  // The first "none" found wins.
  for (const auto& l : r.policies())
    if (l.name == "none") EXPECT_EQ(fs::path(l.file).parent_path(), fs::path(kPlugins));
  EXPECT_EQ(r.find("wrong_abi"), nullptr);
  EXPECT_EQ(r.find("factory_throws"), nullptr);

  // Plugins that load but fail to plan are reported with their file at plan time.
  ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive, 2);
  std::string e = error_of([&] { r.plan(parse_policy_choice("plan_throws"), m); });
  EXPECT_NE(e.find("plan_throws.so"), std::string::npos) << e;
  EXPECT_NE(e.find("out of ideas"), std::string::npos) << e;
  e = error_of([&] { r.plan(parse_policy_choice("illegal_schedule"), m); });
  EXPECT_NE(e.find("illegal_schedule.so"), std::string::npos) << e;
  EXPECT_NE(e.find("validator refuses"), std::string::npos) << e;
  // Everything else keeps working.
  for (const char* p : {"none", "selective", "uniform", "revolve", "offload"})
    EXPECT_NO_THROW(r.plan(parse_policy_choice(p), m)) << p;
}

TEST(PolicyRegistry, AFileThatIsNotALibraryIsRejected) {
  fs::path dir = fs::temp_directory_path() / ("remat_plugins_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "garbage.so") << "not an ELF file\n";
  PolicyRegistry r;
  r.load_dirs({dir.string(), kPlugins});
  const RejectedPlugin* x = rejected(r, "garbage.so");
  ASSERT_NE(x, nullptr);
  EXPECT_NE(x->reason.find("cannot be loaded"), std::string::npos) << x->reason;
  EXPECT_NE(r.find("none"), nullptr);
  fs::remove_all(dir);
}

TEST(PolicyRegistry, PluginPathIsSearchedAfterTheInstalledDirectoryButNeverTheWorkingDirectory) {
  const char* old = std::getenv("REMAT_PLUGIN_PATH");
  std::string saved = old ? old : "";
  ::setenv("REMAT_PLUGIN_PATH", (".:relative/dir::" + kBroken).c_str(), 1);
  auto dirs = PolicyRegistry::default_dirs();
  ASSERT_GE(dirs.size(), 3u);
  EXPECT_EQ(dirs.back(), kBroken);
  for (const auto& d : dirs) EXPECT_TRUE(fs::path(d).is_absolute()) << d;
  // From the broken plugins' own directory with no plugin path, none of them is loaded.
  ::unsetenv("REMAT_PLUGIN_PATH");
  fs::path cwd = fs::current_path();
  fs::current_path(kBroken);
  PolicyRegistry r;
  r.load_dirs(PolicyRegistry::default_dirs());
  fs::current_path(cwd);
  for (const auto& l : r.policies()) EXPECT_NE(fs::path(l.file).parent_path(), fs::path(kBroken));
  EXPECT_TRUE(r.rejected().empty());
  if (old) ::setenv("REMAT_PLUGIN_PATH", saved.c_str(), 1);
}

TEST(PolicyRegistry, PluginPathFromTheEnvironmentLoadsAndReports) {
  const char* old = std::getenv("REMAT_PLUGIN_PATH");
  std::string saved = old ? old : "";
  ::setenv("REMAT_PLUGIN_PATH", kBroken.c_str(), 1);
  PolicyRegistry r;
  r.load_dirs(PolicyRegistry::default_dirs());
  EXPECT_NE(r.find("plan_throws"), nullptr);
  EXPECT_NE(rejected(r, "wrong_abi.so"), nullptr);
  if (old) ::setenv("REMAT_PLUGIN_PATH", saved.c_str(), 1);
  else ::unsetenv("REMAT_PLUGIN_PATH");
}

TEST(PolicyRegistry, UnknownParametersAndPoliciesAreNamed) {
  ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive, 2);
  std::string e = error_of([&] { test::plan("uniform:segmnts=2", m); });
  EXPECT_NE(e.find("segments"), std::string::npos) << e;
  e = error_of([&] { test::plan("offload:what=weights", m); });
  EXPECT_NE(e.find("activations | checkpoints"), std::string::npos) << e;
  e = error_of([&] { test::plan("nonesuch", m); });
  EXPECT_NE(e.find("unknown policy"), std::string::npos) << e;
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

TEST(PolicyRegistry, AMemoryBudgetIsRefusedForAPolicyThatDoesNotPlanToIt) {
  PolicyRegistry r;
  r.load_dirs({test::kPlugins});
  ASSERT_NE(r.find("budget"), nullptr);
  EXPECT_TRUE(r.find("budget")->takes_memory_budget);
  EXPECT_FALSE(r.find("selective")->takes_memory_budget);
  const ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive);
  std::string e = test::error_of([&] { r.plan(parse_policy_choice("selective"), m, 1u << 20); });
  EXPECT_NE(e.find("memory-budget"), std::string::npos) << e;
  EXPECT_NE(e.find("policies that do: budget"), std::string::npos) << e;
  EXPECT_NO_THROW(r.plan(parse_policy_choice("selective"), m));
}

TEST(PolicyChoiceParsing, AParameterGivenTwiceIsRefused) {
  EXPECT_NO_THROW(parse_policy_choice("uniform:segments=2"));
  try {
    parse_policy_choice("uniform:segments=2,segments=3");
    FAIL() << "accepted a parameter given twice";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'segments'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("twice"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace remat
