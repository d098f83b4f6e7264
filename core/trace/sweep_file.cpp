#include "core/trace/sweep_file.h"

#include <nlohmann/json.hpp>

#include "core/trace/run_dir.h"
#include "core/util/error.h"

namespace remat {

std::vector<SweepRun> read_sweep_file(const std::string& path) {
  nlohmann::json j = read_json_file(path);
  if (!j.is_object() || !j.contains("format") || j["format"] != "rematlab-sweep" || !j.contains("runs") ||
      !j["runs"].is_array())
    throw Error(path + ": not a RematLab sweep file");
  std::vector<SweepRun> runs;
  for (const auto& r : j["runs"]) {
    if (!r.is_object() || !r.contains("run") || !r["run"].is_string() || !r.contains("dir") || !r["dir"].is_string())
      throw Error(path + ": a run without 'run' and 'dir'");
    runs.push_back({r["run"].get<std::string>(), r["dir"].get<std::string>()});
  }
  return runs;
}

}  // namespace remat
