// rematlab-batch compare: the comparison table for runs already written (run directories,
// sweep directories, which stand for all their runs, and runs of several ranks, which stand as
// their peak rank or the rank --rank names, labelled with their layout).
// rematlab-batch export: regenerate trace.json or the CSV tables of a run directory from what it
// holds; of a run of several ranks, one trace.json with a process per rank (the ranks whose
// directories are runs of this job; a missing rank is said on stderr, a rank of another job
// refuses the export).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "cli_common.h"
#include "commands.h"
#include "comparison.h"
#include "core/analysis/rank_check.h"
#include "core/analysis/run_layout.h"
#include "core/trace/chrome_trace.h"
#include "core/trace/export_target.h"
#include "core/trace/output_dir.h"
#include "core/trace/ranks_dir.h"
#include "core/trace/run_dir.h"
#include "core/trace/sweep_json.h"
#include "core/util/error.h"
#include "core/util/json_io.h"

namespace fs = std::filesystem;

namespace remat::cli {

namespace {

struct CompareOptions {
  std::vector<std::string> dirs;
  std::optional<int> rank;  // the rank a run of several ranks enters as (default: its peak rank)
  bool json = false;
};

std::string label_of(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  std::string l = p.filename().string();
  return l.empty() || l == "." ? dir : l;
}

// A line on stderr for each leftover of an interrupted write next to (or in) the directories.
void note_leftovers(const std::vector<std::string>& dirs) {
  std::set<std::string> seen;
  for (const auto& dir : dirs)
    for (const auto& l : leftovers_around(dir))
      if (seen.insert(l.path).second) std::cerr << "rematlab-batch: note: " << describe(l) << "\n";
}

int compare(const CompareOptions& o) {
  std::vector<ComparisonRow> rows;
  note_leftovers(o.dirs);
  for (const auto& dir : o.dirs) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) throw Error("run directory '" + dir + "' does not exist");
    bool is_run = fs::exists(fs::path(dir) / kSummaryFile, ec);
    bool is_sweep = !is_run && fs::exists(fs::path(dir) / schema::kSweepFile, ec);
    if (!is_run && is_ranks_dir(dir)) {
      // A run of several ranks enters as one of them, labelled with its layout and rank.
      const RanksDir r = read_ranks_json(dir);
      Trace t = read_rank_run(dir, r, compared_rank(r, o.rank, dir));
      rows.push_back(comparison_row(label_of(dir) + " (" + rank_label(run_layout(t)) + ")", dir, t));
      continue;
    }
    if (!is_sweep) {
      Trace t = read_run_dir(dir);
      const std::string where = rank_label(run_layout(t));  // a rank's directory on its own
      rows.push_back(comparison_row(label_of(dir) + (where.empty() ? "" : " (" + where + ")"), dir, t));
      continue;
    }
    nlohmann::json sj = read_sweep_json((fs::path(dir) / schema::kSweepFile).string());
    for (const auto& r : sj["runs"]) {
      std::string sub = (fs::path(dir) / r["dir"].get<std::string>()).string();
      Trace t = read_run_dir(sub);
      rows.push_back(comparison_row(r["run"].get<std::string>(), sub, t));
    }
  }
  relate_rows(rows);
  bool budgets = false;
  for (const auto& r : rows) budgets = budgets || r.memory_budget > 0;
  if (o.json) {
    std::cout << comparison_json(rows).dump(2) << "\n";
  } else {
    print_comparison(std::cout, rows, budgets);
  }
  return 0;
}

struct ExportOptions {
  std::string dir, format, out;
  bool json = false, force = false;
};

// A run of several ranks as one Chrome trace.
std::string export_ranks(const ExportOptions& o) {
  if (o.format != "chrome")
    throw Error("'" + o.dir + "' is a run of several ranks: export the CSV tables of each of its rank-N directories");
  const RanksDir r = read_ranks_json(o.dir);
  std::vector<std::unique_ptr<Trace>> traces(static_cast<std::size_t>(r.world_size));
  std::vector<const Trace*> raw;
  for (int k = 0; k < r.world_size; ++k) {
    std::error_code ec;
    if (fs::exists(fs::path(o.dir) / r.ranks[static_cast<std::size_t>(k)].dir / kSummaryFile, ec))
      traces[static_cast<std::size_t>(k)] = std::make_unique<Trace>(read_rank_run(o.dir, r, k));
    raw.push_back(traces[static_cast<std::size_t>(k)].get());
  }
  std::vector<ChromeRank> ranks;
  std::vector<RankIssue> missing;
  try {
    missing = chrome_ranks(r, raw, ranks);
  } catch (const Error& e) {
    throw Error("'" + o.dir + "': " + e.what());  // a rank of another job
  }
  for (const RankIssue& i : missing) std::cerr << "rematlab-batch: note: " << i.what << "; exported without it\n";
  const std::string path = o.out.empty() ? (fs::path(o.dir) / kChromeTraceFile).string() : o.out;
  check_export_file(o.dir, path, o.force);
  write_ranks_chrome_trace(ranks, path);
  return path;
}

int export_run(const ExportOptions& o) {
  std::vector<std::string> files;
  std::error_code ec;
  if (!fs::exists(fs::path(o.dir) / kSummaryFile, ec) && is_ranks_dir(o.dir)) {
    files.push_back(export_ranks(o));
    if (o.json) std::cout << nlohmann::json({{"dir", o.dir}, {"format", o.format}, {"files", files}}).dump(2) << "\n";
    else std::cout << files.front() << "\n";
    return 0;
  }
  Trace t = read_run_dir(o.dir);
  if (o.format == "chrome") {
    std::string path = o.out.empty() ? (fs::path(o.dir) / kChromeTraceFile).string() : o.out;
    check_export_file(o.dir, path, o.force);
    write_chrome_trace(t, path);
    files.push_back(path);
  } else {
    std::string dir = o.out.empty() ? o.dir : o.out;
    check_export_dir(o.dir, dir, o.force);
    fs::create_directories(dir, ec);
    if (ec) throw Error("cannot create '" + dir + "': " + ec.message());
    write_csv_tables(t, dir);
    for (const auto& f : csv_table_files()) files.push_back((fs::path(dir) / f).string());
  }
  if (o.json) {
    std::cout << nlohmann::json({{"dir", o.dir}, {"format", o.format}, {"files", files}}).dump(2) << "\n";
  } else {
    for (const auto& f : files) std::cout << f << "\n";
  }
  return 0;
}

}  // namespace

void add_compare_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* c = app.add_subcommand("compare", "print the comparison table of run or sweep directories");
  c->add_option("dirs", o->dirs, "run directories (from run --out) or sweep directories (from sweep --out)")
      ->required();
  c->add_option("--rank", o->rank,
                 "the rank a run of several ranks enters the comparison as (default: its rank with the highest peak)")
      ->check(CLI::NonNegativeNumber);
  c->add_flag("--json", o->json, "print the comparison as JSON");
  c->callback([o, &exit_code] {
    try {
      exit_code = compare(*o);
    } catch (const std::exception& e) {
      exit_code = fail(e);
    }
  });
}

void add_export_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* c = app.add_subcommand("export", "regenerate trace.json or the CSV tables of a run directory");
  c->add_option("dir", o->dir, "run directory, or a run of several ranks (chrome: one process per rank)")->required();
  c->add_option("--format,-f", o->format, "chrome (trace.json) | csv (the CSV tables)")
      ->required()
      ->check(CLI::IsMember({"chrome", "csv"}));
  c->add_option("--out,-o", o->out,
                "where to write: a file for chrome, a directory for csv (default: into the run directory)")
      ->check(non_empty_path());
  c->add_flag("--force", o->force, "replace an earlier export (never anything else)");
  c->add_flag("--json", o->json, "print what was written as JSON");
  c->callback([o, &exit_code] {
    try {
      exit_code = export_run(*o);
    } catch (const std::exception& e) {
      exit_code = fail(e);
    }
  });
}

}  // namespace remat::cli
