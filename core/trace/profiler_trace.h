// A torch.profiler Chrome trace (export_chrome_trace) as a Trace (source "pytorch-profiler"):
// its CPU ops, kernels, runtime calls and copies become ops, its [memory] instants memory
// events (docs/trace-format.md, "Imported traces").
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/trace/trace.h"

namespace remat {

// Throws Error naming `where` for JSON that is not a profiler trace (or is RematLab's own).
Trace trace_from_profiler_json(const nlohmann::json& j, const std::string& where);
Trace import_profiler_trace(const std::string& path);

}  // namespace remat
