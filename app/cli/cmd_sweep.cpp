// rematlab-batch sweep: run one model under several policies (and memory budgets) with the same
// seed and measurement protocol, write a run directory for each and comparison.csv, and print
// the comparison table.
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include "cli_common.h"
#include "commands.h"
#include "comparison.h"
#include "core/backend/backend_factory.h"
#include "core/trace/csv.h"
#include "core/trace/output_dir.h"
#include "core/trace/run_dir.h"
#include "core/trace/schema.h"
#include "core/trace/summary.h"
#include "core/util/error.h"
#include "step_costs.h"
#include "training.h"

namespace fs = std::filesystem;

namespace remat::cli {

// "none,selective,revolve:snapshots=3,offload": policies are separated by commas (or ';'); a
// policy's own parameters follow its ':' and are separated by commas too. A piece that holds
// '=' before any ':' is a parameter of the policy before it; anything else starts a policy.
std::vector<std::string> split_policy_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream groups(text);
  std::string group;
  while (std::getline(groups, group, ';')) {
    std::stringstream pieces(group);
    std::string p;
    bool have = false;  // a policy of this group to give parameters to
    while (std::getline(pieces, p, ',')) {
      while (!p.empty() && std::isspace(static_cast<unsigned char>(p.back()))) p.pop_back();
      while (!p.empty() && std::isspace(static_cast<unsigned char>(p.front()))) p.erase(p.begin());
      if (p.empty()) continue;
      std::size_t eq = p.find('='), colon = p.find(':');
      if (eq != std::string::npos && (colon == std::string::npos || colon > eq)) {
        if (!have) throw ConfigError("policies", "'" + p + "' is a parameter with no policy before it");
        out.back() += out.back().find(':') == std::string::npos ? ":" : ",";
        out.back() += p;
      } else {
        out.push_back(p);
        have = true;
      }
    }
  }
  return out;
}

namespace {

struct SweepOptions {
  ModelOptions model;
  TrainOptions train;
  std::string policies, budgets, out, costs_from;
  std::string budget_policy = "budget";  // planned at each of --memory-budgets
  bool json = false, force = false;
};

struct Entry {
  std::string label, text;
  Schedule schedule;
  std::optional<std::uint64_t> budget;
};

std::string sanitize(const std::string& s) {
  std::string o;
  for (char c : s) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' ||
              c == '=' || c == '@';
    o += ok ? c : '_';
  }
  if (o.empty() || o[0] == '.') o = "_" + o;
  return o;
}

int sweep(const SweepOptions& o) {
  ModelConfig m = o.model.resolve();
  TrainOptions train = o.train;
  train.inputs = {{o.model.model, "--model"}};
  PolicyRegistry reg;
  load_plugins(reg, !o.json);
  // The device first: a missing GPU is one line, before anything is planned or written.
  {
    SteadyClock c;
    make_device(o.train.device, o.train.threads, c, false);
  }
  const std::optional<StepCosts> costs = load_step_costs(o.costs_from, m);
  const StepCosts* cost = costs ? &*costs : nullptr;
  std::vector<std::string> texts;
  if (o.policies.empty()) {
    for (const auto& n : reg.names())
      if (n != "budget") texts.push_back(n);
    std::stable_partition(texts.begin(), texts.end(), [](const std::string& n) { return n == "none"; });
  } else {
    texts = split_policy_list(o.policies);
  }
  std::vector<Entry> entries;
  std::set<std::string> labels;
  auto add = [&](Entry e) {
    std::string base = e.label;
    for (int k = 2; labels.count(e.label); ++k) e.label = base + "-" + std::to_string(k);
    labels.insert(e.label);
    entries.push_back(std::move(e));
  };
  // Plan everything first: an unknown policy or bad parameter fails before anything runs.
  for (const auto& text : texts) {
    Entry e;
    e.text = text;
    e.label = sanitize(text);
    e.schedule = reg.plan(parse_policy_choice(text), m, std::nullopt, cost);
    add(std::move(e));
  }
  if (!o.budgets.empty()) {
    const LoadedPolicy* bp = reg.find(o.budget_policy);
    if (!bp || !bp->takes_memory_budget) {
      std::string those;
      for (const LoadedPolicy& p : reg.policies())
        if (p.takes_memory_budget) those += (those.empty() ? "" : ", ") + p.name;
      throw ConfigError("budget-policy", "'" + o.budget_policy + "' is not a loaded policy that plans to a memory budget (those that do: " +
                                             (those.empty() ? std::string("none loaded") : those) + ")");
    }
    std::stringstream ss(o.budgets);
    std::string b;
    while (std::getline(ss, b, ',')) {
      if (b.empty()) continue;
      Entry e;
      e.budget = parse_bytes("memory-budgets", b);
      e.text = o.budget_policy + "@" + b;
      e.label = sanitize(e.text);
      e.schedule = reg.plan(PolicyChoice{o.budget_policy, {}}, m, e.budget, cost);
      add(std::move(e));
    }
  }
  if (entries.empty()) throw ConfigError("policies", "nothing to run");

  std::string tmp;
  if (!o.out.empty()) {
    check_output_dir(o.out, o.force);
    tmp = make_temp_dir(o.out, OutputKind::Sweep);
  }
  std::vector<ComparisonRow> rows;
  nlohmann::json runs = nlohmann::json::array();
  bool interrupted = false;
  try {
    Progress bar(!o.json);
    const double n = static_cast<double>(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      if (interrupt_flag().load()) {
        interrupted = true;
        break;
      }
      Trace t = remat::cli::train(m, e.schedule, train, e.budget,
                      [&](double f, const std::string& what) {
                        bar.update((static_cast<double>(i) + f) / n, e.label + ": " + what);
                      },
                      &interrupt_flag());
      add_costs_provenance(t, costs);
      if (t.status == "cancelled") interrupted = true;
      std::string dir;
      if (!o.out.empty()) {
        write_run_dir(t, (fs::path(tmp) / e.label).string(), false);
        dir = (fs::path(o.out) / e.label).string();
      }
      rows.push_back(comparison_row(e.label, dir, t));
      runs.push_back({{"run", e.label}, {"dir", e.label}, {"policy", e.text},
                      {"memory_budget_bytes", e.budget.value_or(0)}, {"status", t.status}});
      if (interrupted) break;
    }
    bar.done();
    relate_rows(rows);
    if (!o.out.empty()) {
      write_comparison_csv(rows, (fs::path(tmp) / "comparison.csv").string());
      nlohmann::json sj = {{"format", schema::kSweepFormat},
                           {"format_version", schema::kSweepFormatVersion},
                           {"model", model_to_json(m)},
                           {"device", o.train.device},
                           {"seed", o.train.seed},
                           {"steps", o.train.steps},
                           {"warmup", o.train.warmup},
                           {"complete", !interrupted && rows.size() == entries.size()},
                           {"runs", runs},
                           {"provenance", {{"program", "rematlab"}, {"version", program_version()},
                                           {"git_commit", program_commit()}}}};
      if (costs) sj["provenance"][kPlannerCostsKey] = costs->unit;
      csv::OutFile f((fs::path(tmp) / schema::kSweepFile).string());
      f.write(sj.dump(2));
      f.put('\n');
      f.commit();
      // From here the result is commit_temp_dir's to keep: it is never deleted.
      const std::string done = tmp;
      tmp.clear();
      commit_temp_dir(done, o.out, o.force);
    }
  } catch (...) {
    std::error_code ec;
    if (!tmp.empty()) fs::remove_all(tmp, ec);
    throw;
  }
  if (o.json) {
    nlohmann::json j = comparison_json(rows);
    j["dir"] = o.out;
    std::cout << j.dump(2) << "\n";
  } else {
    print_comparison(std::cout, rows, !o.budgets.empty());
    if (!o.out.empty()) std::cout << "\nwritten to " << o.out << " (comparison.csv and one directory per run)\n";
  }
  std::size_t bad = 0;
  for (const auto& r : rows) bad += !r.complete;
  if (interrupted)
    return fail("sweep interrupted: " + std::to_string(rows.size() - bad) + " of " +
                std::to_string(entries.size()) + " runs completed");
  if (bad) return fail(std::to_string(bad) + " of " + std::to_string(rows.size()) + " runs did not complete (see the status column)");
  return 0;
}

}  // namespace

void add_sweep_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* c = app.add_subcommand("sweep", "run one model under several policies and compare them");
  o->model.add(*c);
  c->add_option("--policies", o->policies,
                "comma-separated policies, each NAME[:param=value,...] (default: every loaded "
                "policy but budget), e.g. none,selective,uniform,revolve:snapshots=3,offload; ';' "
                "also separates policies");
  c->add_option("--memory-budgets", o->budgets,
                "comma-separated activation budgets, e.g. 2MiB,4MiB: adds a run of the budget policy for each");
  c->add_option("--budget-policy", o->budget_policy,
                "the policy planned at each of --memory-budgets: budget (default) or optimal");
  add_costs_from_option(*c, o->costs_from);
  o->train.add(*c);
  c->add_option("--out,-o", o->out, "write the sweep here: comparison.csv, sweep.json and a run directory per run")
      ->check(non_empty_path());
  c->add_flag("--force", o->force, "replace an existing sweep directory");
  c->add_flag("--json", o->json, "print the comparison as JSON");
  c->callback([o, &exit_code] {
    try {
      exit_code = sweep(*o);
    } catch (const std::exception& e) {
      exit_code = fail(e);
    }
  });
}

}  // namespace remat::cli
