// ranks.json as `compare DIR` and the desktop app read a run of several ranks: the ranks summary,
// then rank 0's run as `compare` opens such a directory (here it left none).
#include <filesystem>
#include <optional>

#include "core/trace/ranks_dir.h"
#include "core/trace/run_dir.h"
#include "core/trace/schema.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/targets.h"

namespace remat::fuzz {

void ranks_json(const std::uint8_t* data, std::size_t size) {
  static const std::string dir = [] {
    const std::string d = scratch_path("ranks");
    std::filesystem::create_directories(d);
    return d;
  }();
  write_file((std::filesystem::path(dir) / schema::kRanksFile).string(), data, size);
  refused_or_accepted([] {
    const RanksDir r = read_ranks_json(dir);
    peak_rank(r);
    compared_rank(r, std::nullopt, dir);
  });
  refused_or_accepted([] { read_run_dir(dir); });
}

}  // namespace remat::fuzz
