// rematlab-batch diff A B [--out FILE.csv]: two runs' steps op by op (core/analysis/op_diff.h):
// what the second added, removed or ran faster or slower, summed per phase on stdout and one
// row per matched or unmatched op in the CSV. A and B are run directories, or runs of several
// ranks (each enters as its peak rank, or --rank N). Runs of different models, layouts or
// sources are refused with what differs.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "cli_common.h"
#include "commands.h"
#include "core/analysis/op_diff.h"
#include "core/analysis/run_layout.h"
#include "core/trace/ranks_dir.h"
#include "core/trace/run_dir.h"
#include "core/trace/schema.h"
#include "core/util/error.h"
#include "core/util/output_file.h"

namespace fs = std::filesystem;

namespace remat::cli {

namespace {

struct DiffOptions {
  std::string a, b, out;
  std::optional<int> rank;
  bool json = false, force = false;
};

Trace read_side(const std::string& dir, std::optional<int> rank) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw Error("run directory '" + dir + "' does not exist");
  if (!fs::exists(fs::path(dir) / kSummaryFile, ec) && is_ranks_dir(dir)) {
    const RanksDir r = read_ranks_json(dir);
    return read_rank_run(dir, r, compared_rank(r, rank, dir));
  }
  return read_run_dir(dir);
}

// The CSV goes nowhere inside a run, sweep or ranks directory, and over an existing file only
// with --force and only over a file that is a diff.
void check_out(const std::string& out, bool force) {
  std::error_code ec;
  fs::path at = fs::weakly_canonical(fs::absolute(fs::path(out).parent_path().empty() ? fs::path(".") : fs::path(out).parent_path(), ec), ec);
  for (fs::path p = at; !ec; p = p.parent_path()) {
    for (const char* f : {kSummaryFile, schema::kSweepFile, schema::kRanksFile})
      if (fs::is_regular_file(p / f, ec))
        throw Error("--out '" + out + "' is in the run directory '" + p.string() + "'; diff writes into none");
    if (!p.has_relative_path()) break;
  }
  const auto st = fs::symlink_status(out, ec);
  if (!fs::exists(st)) return;
  if (!force) throw Error("'" + out + "' exists; use --force to replace it");
  if (const std::string why = why_not_writable(out, {}, "--out"); !why.empty()) throw Error(why);
  std::ifstream in(out);
  std::string head;
  std::getline(in, head);
  if (head.rfind("status,stream,phase,block,name", 0) != 0)
    throw Error("'" + out + "' is not a diff that rematlab-batch wrote; refusing to replace it even with --force");
}

std::string ms(std::int64_t ns) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", static_cast<double>(ns) / 1e6);
  return b;
}

std::string signed_ms(std::int64_t ns) { return (ns > 0 ? "+" : "") + ms(ns); }

std::string name_of(const Trace& t, const std::string& dir) {
  const std::string where = rank_label(run_layout(t));
  return dir + " (" + t.model.name + " · " + t.policy + (where.empty() ? "" : " · " + where) + ")";
}

int diff(const DiffOptions& o) {
  const Trace a = read_side(o.a, o.rank), b = read_side(o.b, o.rank);
  if (!o.out.empty()) check_out(o.out, o.force);
  const OpDiff d = op_diff(a, b);
  if (!o.out.empty()) write_op_diff_csv(o.out, d);
  if (o.json) {
    nlohmann::json j = {{"a", o.a}, {"b", o.b}, {"matched", d.matched}, {"added", d.added}, {"removed", d.removed},
                        {"a_step_ns", d.a_step_ns}, {"b_step_ns", d.b_step_ns}, {"notes", d.notes}};
    nlohmann::json phases = nlohmann::json::object();
    for (int p = 0; p < kNumPhases; ++p) {
      const PhaseDiff& x = d.phases[static_cast<std::size_t>(p)];
      if (!x.a_ops && !x.b_ops) continue;
      phases[to_string(static_cast<Phase>(p))] = {{"a_ops", x.a_ops}, {"b_ops", x.b_ops}, {"a_ns", x.a_ns},
                                                  {"b_ns", x.b_ns}, {"added", x.added}, {"added_ns", x.added_ns},
                                                  {"removed", x.removed}, {"removed_ns", x.removed_ns},
                                                  {"matched_delta_ns", x.matched_delta_ns}};
    }
    j["phases"] = phases;
    if (!o.out.empty()) j["csv"] = o.out;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "A: " << name_of(a, o.a) << "\nB: " << name_of(b, o.b) << "\n";
  for (const auto& n : d.notes) std::cout << "note: " << n << "\n";
  std::printf("%-10s %8s %12s %8s %12s %16s %16s %12s\n", "phase", "A ops", "A ms", "B ops", "B ms", "added (ms)",
              "removed (ms)", "matched Δ ms");
  for (int p = 0; p < kNumPhases; ++p) {
    const PhaseDiff& x = d.phases[static_cast<std::size_t>(p)];
    if (!x.a_ops && !x.b_ops) continue;
    const std::string added = std::to_string(x.added) + " (" + ms(x.added_ns) + ")";
    const std::string removed = std::to_string(x.removed) + " (" + ms(x.removed_ns) + ")";
    std::printf("%-10s %8llu %12s %8llu %12s %16s %16s %12s\n", to_string(static_cast<Phase>(p)),
                static_cast<unsigned long long>(x.a_ops), ms(x.a_ns).c_str(), static_cast<unsigned long long>(x.b_ops),
                ms(x.b_ns).c_str(), added.c_str(), removed.c_str(), signed_ms(x.matched_delta_ns).c_str());
  }
  std::cout << "step: A " << ms(d.a_step_ns) << " ms, B " << ms(d.b_step_ns) << " ms (" << signed_ms(d.b_step_ns - d.a_step_ns)
            << " ms); ops " << d.matched << " matched, " << d.added << " added, " << d.removed << " removed\n";
  if (!o.out.empty()) std::cout << "wrote " << o.out << " (" << d.rows.size() << " rows)\n";
  return 0;
}

}  // namespace

void add_diff_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<DiffOptions>();
  CLI::App* c = app.add_subcommand("diff", "two runs' steps op by op: what the second added, removed or changed in time");
  c->add_option("a", o->a, "the first run directory (or run of several ranks)")->required();
  c->add_option("b", o->b, "the second")->required();
  c->add_option("--out,-o", o->out, "write one CSV row per matched or unmatched op here")->check(non_empty_path());
  c->add_option("--rank", o->rank, "the rank a run of several ranks enters as (default: its rank with the highest peak)")
      ->check(CLI::NonNegativeNumber);
  c->add_flag("--force", o->force, "replace an existing --out file");
  c->add_flag("--json", o->json, "print the sums as JSON");
  c->callback([o, &exit_code] {
    try {
      exit_code = diff(*o);
    } catch (const std::exception& e) {
      exit_code = fail(e);
    }
  });
}

}  // namespace remat::cli
