// A run directory: summary.json, the CSV tables and trace.json (docs/trace-format.md).
// Written to a temporary name and renamed at the end, so an interrupted write never leaves a
// directory that looks complete. Read back by `compare`, `export` and the desktop app.
#pragma once
#include <string>

#include "core/trace/trace.h"

namespace remat {

// Throws Error when `dir` exists and force is false, or when it cannot be written.
void write_run_dir(const Trace& t, const std::string& dir, bool force);
// Throws Error naming the missing or corrupt file.
Trace read_run_dir(const std::string& dir);

// Chrome trace JSON (opens in Perfetto): ops and kernels per stream, memory counters, phases.
void write_chrome_trace(const Trace& t, const std::string& path);
// The CSV tables into an existing directory.
void write_csv_tables(const Trace& t, const std::string& dir);

}  // namespace remat
