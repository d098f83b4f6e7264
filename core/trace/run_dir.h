// A run directory: summary.json, the CSV tables and trace.json (docs/trace-format.md).
// Written to a temporary name and moved into place at the end (output_dir.h), so an interrupted
// write never leaves a directory that looks complete. Read back by `compare`, `export` and the
// desktop app.
#pragma once
#include <string>
#include <vector>

#include "core/trace/trace.h"

namespace remat {

// Throws Error when `dir` exists and force is false, when it is not a directory of ours that
// may be replaced (check_output_dir), or when it cannot be written. With `checked_before` the
// caller ran check_output_dir before the work (a run that took a while): a `dir` that appeared
// or changed since is not replaced, and the result is kept next to it (commit_temp_dir).
void write_run_dir(const Trace& t, const std::string& dir, bool force, bool checked_before = false);
// Throws Error naming the missing or corrupt file.
Trace read_run_dir(const std::string& dir);

// Chrome trace JSON (opens in Perfetto): ops and kernels per stream, memory counters, phases.
void write_chrome_trace(const Trace& t, const std::string& path);
// The CSV tables into an existing directory.
void write_csv_tables(const Trace& t, const std::string& dir);

// The files of a run directory.
inline constexpr const char* kSummaryFile = "summary.json";
inline constexpr const char* kScheduleFile = "schedule.json";
inline constexpr const char* kChromeTraceFile = "trace.json";
// How a Chrome trace that RematLab writes begins (its format version follows).
inline constexpr const char* kChromeTraceHead =
    "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"format\":\"rematlab-chrome-trace\",\"format_version\":";
const std::vector<std::string>& csv_table_files();  // memory_events.csv, ... loss.csv
// Data rows each CSV table of `t` has, in the order of csv_table_files().
std::vector<std::size_t> csv_table_rows(const Trace& t);

}  // namespace remat
