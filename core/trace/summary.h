// The summary of a run as JSON: what `rematlab-batch run --json` prints and summary.json holds.
#pragma once
#include <nlohmann/json.hpp>

#include "core/trace/trace.h"

namespace remat {

nlohmann::json summary_json(const Trace& t);
// Program version and git commit this binary was built from.
std::string program_version();
std::string program_commit();

}  // namespace remat
