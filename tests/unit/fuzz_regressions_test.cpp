// Every input under tests/fuzz-regressions/<target>/ (what the fuzz targets once found) goes
// through the same reader code as its fuzz target: it must be accepted or refused with
// remat::Error; another exception fails the test, a crash fails the run. Inputs named in
// tests/fuzz-regressions/known-findings.txt await their fix and are only listed here;
// scripts/fuzz.sh replays them all and fails on them (docs/testing.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/targets.h"

namespace fs = std::filesystem;

namespace remat {
namespace {

const fs::path kRegressions = fs::path(REMAT_SOURCE_DIR) / "tests" / "fuzz-regressions";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "target/file" of each known finding (the first word of each line; # starts a comment).
std::set<std::string> known_findings() {
  std::set<std::string> known;
  std::ifstream in(kRegressions / "known-findings.txt");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string w;
    if (words >> w && w[0] != '#') known.insert(w);
  }
  return known;
}

std::vector<fs::path> inputs_of(const std::string& target) {
  std::vector<fs::path> v;
  for (const auto& e : fs::directory_iterator(kRegressions / target))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

TEST(FuzzRegressions, EveryTargetHasItsDirectory) {
  for (const auto& t : fuzz::kTargets)
    EXPECT_TRUE(fs::is_directory(kRegressions / t.name)) << kRegressions / t.name;
}

TEST(FuzzRegressions, KnownFindingsNameExistingInputs) {
  for (const auto& k : known_findings()) EXPECT_TRUE(fs::is_regular_file(kRegressions / k)) << k;
}

TEST(FuzzRegressions, EachInputIsAcceptedOrRefusedWithAnError) {
  const auto known = known_findings();
  std::size_t replayed = 0;
  for (const auto& t : fuzz::kTargets) {
    for (const auto& p : inputs_of(t.name)) {
      const std::string id = std::string(t.name) + "/" + p.filename().string();
      if (known.count(id)) {
        std::cout << "[ known    ] " << id << " (awaits its fix; see known-findings.txt)\n";
        continue;
      }
      const std::string bytes = slurp(p);
      SCOPED_TRACE(id);
      EXPECT_NO_THROW(t.entry(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
      ++replayed;
    }
  }
  EXPECT_GT(replayed, 0u) << "no regression inputs under " << kRegressions;
}

}  // namespace
}  // namespace remat
