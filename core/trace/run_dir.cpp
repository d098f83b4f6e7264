// Writing and reading run directories. The CSV tables hold every record of the trace; the
// summary holds every figure and the configuration; together they restore the Trace exactly.
#include "core/trace/run_dir.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <functional>
#include <exception>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/analysis/memory_timeline.h"
#include "core/trace/csv.h"
#include "core/trace/output_dir.h"
#include "core/trace/run_dir_read.h"
#include "core/trace/schema.h"
#include "core/trace/summary.h"
#include "core/util/error.h"
#include "core/util/json_io.h"

namespace fs = std::filesystem;

namespace remat {

namespace {

using schema::kEventsFile;
using schema::kLedgerFile;
using schema::kLossFile;
using schema::kRoutingFile;
using schema::kOpsFile;
using schema::kScheduleCsv;
using schema::kTimelineFile;

std::string join(const std::string& dir, const char* file) { return (fs::path(dir) / file).string(); }

// The writers write the newest format version (the readers read older ones too).
std::vector<std::string> header_of(const char* file) { return schema::table(file).header(kTraceFormatVersion); }

// ------------------------------------------------------------------ the tables

void write_events(const Trace& t, const std::string& path) {
  csv::Writer w(path, header_of(kEventsFile));
  static const std::string empty;
  for (const auto& e : t.events) {
    const std::string& nm = e.tensor < t.names.size() ? t.names[e.tensor] : empty;
    w.i64(e.t_ns).i64(e.step).u64(e.id).i64(e.delta).str(to_string(e.category)).i64(e.block)
        .str(nm).str(to_string(e.phase)).str(to_string(e.space)).u64(e.reserved).u64(e.op_seq);
    w.end_row();
  }
  w.commit();
}

void write_timeline(const Trace& t, const std::string& path) {
  csv::Writer w(path, header_of(kTimelineFile));
  for_each_timeline_point(t, [&w](const TimelinePoint& p) {
    w.i64(p.t_ns).i64(p.event).i64(p.device).i64(p.host);
    for (auto v : p.live) w.i64(v);
    w.end_row();
  });
  w.commit();
}

void write_ops(const Trace& t, const std::string& path) {
  csv::Writer w(path, header_of(kOpsFile));
  for (const auto& o : t.ops) {
    w.i64(o.start_ns).i64(o.end_ns).str(to_string(o.stream)).str(o.name).str(o.op).i64(o.block)
        .str(to_string(o.phase)).i64(o.step).u64(o.flops).u64(o.bytes).u64(o.op_id).str(ranks_text(o.ranks));
    w.end_row();
  }
  w.commit();
}

void write_schedule_csv(const Trace& t, const std::string& path) {
  csv::Writer w(path, header_of(kScheduleCsv));
  for (const auto& s : t.schedule_records) {
    w.u64(s.index).str(s.action).i64(s.block).str(s.keep).str(to_string(s.phase)).i64(s.start_ns)
        .i64(s.end_ns).i64(s.step);
    w.end_row();
  }
  w.commit();
}

void write_ledger(const Trace& t, const std::string& path) {
  csv::Writer w(path, header_of(kLedgerFile));
  for (const auto& l : t.ledger) {
    w.i64(l.block).str(l.tensor).u64(l.bytes).str(to_string(l.category)).str(to_string(l.created))
        .i64(l.created_ns).i64(l.freed_ns).str(l.decision).u64(l.alloc_id).u64(l.free_id).str(l.why);
    w.end_row();
  }
  w.commit();
}

void write_loss(const Trace& t, const std::string& path) {
  csv::Writer w(path, header_of(kLossFile));
  for (const auto& s : t.step_stats) {
    w.i64(s.step).i64(s.counted ? 1 : 0).f64(s.loss).f64(s.time_ms).u64(s.peak_bytes)
        .u64(s.reserved_bytes).i64(s.start_ns).i64(s.end_ns);
    w.end_row();
  }
  w.commit();
}

void write_routing(const Trace& t, const std::string& path) {
  csv::Writer w(path, header_of(kRoutingFile));
  for (const auto& r : t.routing) {
    w.i64(r.micro_batch).i64(r.layer).i64(r.expert).u64(r.routed).u64(r.kept);
    w.end_row();
  }
  w.commit();
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  csv::OutFile f(path);
  f.write(j.dump(2));
  f.put('\n');
  f.commit();
}

// Runs independent file jobs on their own threads (the big tables take about the same time);
// rethrows the first error after every job has finished.
void in_parallel(const std::vector<std::function<void()>>& jobs) {
  std::vector<std::exception_ptr> errors(jobs.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < jobs.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        jobs[i]();
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  if (!jobs.empty()) {
    try {
      jobs[0]();
    } catch (...) {
      errors[0] = std::current_exception();
    }
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

// ------------------------------------------------------------------ public

const std::vector<std::string>& csv_table_files() {
  static const std::vector<std::string> f = {kEventsFile, kTimelineFile, kOpsFile,
                                             kScheduleCsv, kLedgerFile, kLossFile, kRoutingFile};
  return f;
}

std::vector<std::size_t> csv_table_rows(const Trace& t) {
  TimelineRange r = timeline_range(t);
  return {t.events.size(), r.end - r.first + 2, t.ops.size(), t.schedule_records.size(),
          t.ledger.size(), t.step_stats.size(), t.routing.size()};
}

namespace {

std::vector<std::function<void()>> table_jobs(const Trace& t, const std::string& dir) {
  return {[&t, dir] { write_events(t, join(dir, kEventsFile)); },
          [&t, dir] { write_timeline(t, join(dir, kTimelineFile)); },
          [&t, dir] { write_ops(t, join(dir, kOpsFile)); },
          [&t, dir] {
            write_schedule_csv(t, join(dir, kScheduleCsv));
            write_ledger(t, join(dir, kLedgerFile));
            write_loss(t, join(dir, kLossFile));
            write_routing(t, join(dir, kRoutingFile));
          }};
}

}  // namespace

void write_csv_tables(const Trace& t, const std::string& dir) { in_parallel(table_jobs(t, dir)); }

void write_run_dir(const Trace& t, const std::string& dir, bool force, bool checked_before) {
  if (!checked_before) check_output_dir(dir, force);
  std::string tmp = make_temp_dir(dir);
  try {
    nlohmann::json s = summary_json(t);
    auto rows = csv_table_rows(t);
    nlohmann::json files = nlohmann::json::object();
    for (std::size_t i = 0; i < rows.size(); ++i) files[csv_table_files()[i]] = {{"rows", rows[i]}};
    files[kChromeTraceFile] = nlohmann::json::object();
    files[kScheduleFile] = nlohmann::json::object();
    s["files"] = files;
    auto jobs = table_jobs(t, tmp);
    jobs.insert(jobs.begin(), [&t, &tmp] { write_chrome_trace(t, join(tmp, kChromeTraceFile)); });
    jobs.push_back([&t, &tmp] { write_json_file(join(tmp, kScheduleFile), schedule_to_json(t.schedule)); });
    in_parallel(jobs);
    write_json_file(join(tmp, kSummaryFile), s);  // last: a directory with it is whole
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  commit_temp_dir(tmp, dir, force);
}

// A run of several ranks (ranks.json over rank-N/): rank 0's run, with a note saying so.
static Trace read_first_rank(const std::string& dir) {
  const nlohmann::json j = read_json_file(join(dir, schema::kRanksFile));
  if (!j.is_object() || !json_string_is(j, "format", schema::kRanksFormat))
    throw Error("'" + join(dir, schema::kRanksFile) + "' is not a RematLab ranks summary (its \"format\" is not \"" +
                schema::kRanksFormat + "\")");
  const auto v = j.find("format_version");
  if (v == j.end() || !v->is_number_integer() || v->get<std::int64_t>() < 1 ||
      v->get<std::int64_t>() > schema::kRanksFormatVersion)
    throw Error("'" + join(dir, schema::kRanksFile) + "' has a format version this program does not know (1 to " +
                std::to_string(schema::kRanksFormatVersion) + ")");
  const auto w = j.find("world_size");
  const std::string world = w != j.end() && w->is_number_integer() ? std::to_string(w->get<std::int64_t>()) : "?";
  const std::string first = join(dir, "rank-0");
  if (!fs::exists(join(first, kSummaryFile)))
    throw Error("'" + dir + "' is a run of " + world + " ranks whose rank 0 left no run directory (" +
                json_string(j, "error", "see ranks.json", join(dir, schema::kRanksFile)) + ")");
  Trace t = read_run_dir(first);
  t.provenance.emplace_back("note", "rank 0 of a run of " + world + " ranks; every rank is in " + dir +
                                        "/rank-N and ranks.json sums them up");
  return t;
}

Trace read_run_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw Error("run directory '" + dir + "' does not exist");
  if (!fs::is_directory(dir, ec)) throw Error("'" + dir + "' is not a directory");
  if (!fs::exists(join(dir, kSummaryFile), ec) && fs::exists(join(dir, schema::kRanksFile), ec))
    return read_first_rank(dir);
  if (!fs::exists(join(dir, kSummaryFile), ec))
    throw Error("'" + dir + "' is not a run directory (no summary.json)");
  Trace t;
  // The summary first (the version, the model and the steps bound the rest), then the schedule,
  // then the tables (each job fills its own fields of t; errors come back in file order), then
  // the files against each other.
  const nlohmann::json j = run_dir_read::read_summary(dir, t);
  run_dir_read::read_schedule(dir, j, t);
  in_parallel(run_dir_read::table_jobs(dir, j, t));
  run_dir_read::cross_check(dir, j, t);
  return t;
}

}  // namespace remat
