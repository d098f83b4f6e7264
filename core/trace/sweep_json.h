// sweep.json of a sweep directory (docs/trace-format.md "sweep directories"), read back by
// `compare`: checked against its schema (core/trace/schema.h) before anything uses it.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace remat {

// Reads `path` (a regular file) and checks its format and version (a newer one is refused by
// name), every field of that version, and that each run's 'dir' lies inside the sweep
// directory. Throws Error naming the file and the field.
nlohmann::json read_sweep_json(const std::string& path);

}  // namespace remat
