#include "core/trace/sweep_json.h"

#include <filesystem>

#include "core/trace/schema.h"
#include "core/util/error.h"
#include "core/util/json_io.h"

namespace remat {

nlohmann::json read_sweep_json(const std::string& path) {
  nlohmann::json j = read_json_file(path);
  if (!j.is_object() || !j.contains("format") || j["format"] != schema::kSweepFormat)
    throw Error(path + ": not a RematLab sweep file (format " +
                (j.is_object() && j.contains("format") ? json_snippet(j["format"]) : std::string("missing")) + ")");
  const int version = schema::check_format_version(j.contains("format_version") ? j["format_version"] : nlohmann::json(),
                                                   schema::kSweepFormatVersion, path);
  schema::check_fields(j, schema::sweep_fields(), version, path);
  std::size_t i = 0;
  for (const auto& r : j["runs"]) {
    const std::string where = path + " 'runs' entry " + std::to_string(i++);
    schema::check_fields(r, schema::sweep_run_fields(), version, where);
    const std::filesystem::path dir(r["dir"].get<std::string>());
    bool inside = !dir.empty() && dir.is_relative();
    for (const auto& part : dir) inside = inside && part != "..";
    if (!inside)
      throw Error(where + ": field 'dir' " + json_snippet(r["dir"]) + " is not a directory inside the sweep directory");
  }
  return j;
}

}  // namespace remat
