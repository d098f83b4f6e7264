// Reading a run directory back, every file checked against the schema (core/trace/schema.h)
// and against each other. read_run_dir (run_dir.cpp) runs these in order, the tables in
// parallel. Every error names the file, and in a table the line, the column and the value.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/trace/trace.h"

namespace remat::run_dir_read {

// summary.json: its format and version, then every field of that version, into t.
nlohmann::json read_summary(const std::string& dir, Trace& t);
// schedule.json, checked with validate_schedule against the model and against the summary's
// plan (summary read first).
void read_schedule(const std::string& dir, const nlohmann::json& summary, Trace& t);
// One job per group of tables; each fills its own fields of t (summary and schedule read first).
std::vector<std::function<void()>> table_jobs(const std::string& dir, const nlohmann::json& summary, Trace& t);
// What the summary says against the tables: row counts, counted steps, FLOPs, schedule rows.
void cross_check(const std::string& dir, const nlohmann::json& summary, const Trace& t);

}  // namespace remat::run_dir_read
