// A run directory: summary.json, the CSV tables and trace.json (docs/trace-format.md).
// Written to a temporary name and renamed at the end, so an interrupted write never leaves a
// directory that looks complete. Read back by `compare`, `export` and the desktop app.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/trace/trace.h"

namespace remat {

// Throws Error when `dir` exists and force is false, or when it cannot be written.
void write_run_dir(const Trace& t, const std::string& dir, bool force);
// Throws Error naming the missing or corrupt file.
Trace read_run_dir(const std::string& dir);

// A JSON file of a run or sweep directory. Throws Error naming the file when it is missing,
// unreadable or not valid JSON.
nlohmann::json read_json_file(const std::string& path);

// Chrome trace JSON (opens in Perfetto): ops and kernels per stream, memory counters, phases.
void write_chrome_trace(const Trace& t, const std::string& path);
// The CSV tables into an existing directory.
void write_csv_tables(const Trace& t, const std::string& dir);

// The files of a run directory.
inline constexpr const char* kSummaryFile = "summary.json";
inline constexpr const char* kScheduleFile = "schedule.json";
inline constexpr const char* kChromeTraceFile = "trace.json";
const std::vector<std::string>& csv_table_files();  // memory_events.csv, ... loss.csv
// Data rows each CSV table of `t` has, in the order of csv_table_files().
std::vector<std::size_t> csv_table_rows(const Trace& t);

// Output directories (run and sweep): checked before the work, built under a temporary name
// next to the target and renamed into place at the end.
//
// check_output_dir throws Error when `dir` exists and force is false; when it exists and is not
// a directory, or is a non-empty directory that is neither a run directory (summary.json) nor a
// sweep directory (sweep.json), even with force; and when its parent cannot be created or
// written. It leaves nothing behind but the parent directories it created.
void check_output_dir(const std::string& dir, bool force);
// Creates an empty temporary directory next to `dir` and returns its path.
std::string make_temp_dir(const std::string& dir);
// Renames `tmp` to `dir`, replacing what is there (checked by check_output_dir); on failure the
// old directory stays and `tmp` is removed.
void commit_temp_dir(const std::string& tmp, const std::string& dir);

}  // namespace remat
