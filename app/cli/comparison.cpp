#include "comparison.h"

#include "core/analysis/run_compare.h"
#include "core/analysis/run_layout.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "cli_common.h"
#include "core/trace/csv.h"
#include "core/util/hash.h"

namespace remat::cli {

ComparisonRow comparison_row(const std::string& run, const std::string& dir, const Trace& t) {
  ComparisonRow r;
  r.run = run;
  r.dir = dir;
  r.policy = t.policy;
  r.params = t.policy_params;
  r.memory_budget = t.memory_budget;
  r.status = t.status;
  r.complete = t.complete;
  r.model = t.model.name;
  r.device = t.device;
  r.seed = t.seed;
  r.steps = t.steps;
  r.warmup = t.warmup;
  r.peak_bytes = t.peak_bytes;
  r.predicted_peak_bytes = t.predicted_peak_bytes;
  auto times = t.step_times_ms();
  r.step_ms_median = median(times);
  if (!times.empty()) {
    auto [mn, mx] = std::minmax_element(times.begin(), times.end());
    r.step_ms_spread = *mx - *mn;
  }
  r.recompute_flops = t.flops.recompute;
  r.total_flops = t.flops.total();
  r.block_forwards = t.block_forwards;
  r.grad_checksum = hex64(t.grad_checksum);
  r.model_json = model_to_json(global_model(t)).dump();
  const RunLayout l = run_layout(t);
  r.layout = layout_label(l);
  r.rank = l.rank;
  return r;
}

void relate_rows(std::vector<ComparisonRow>& rows) {
  std::vector<RunFigures> f;
  for (const auto& r : rows)
    f.push_back({r.policy, r.model_json, r.device, r.grad_checksum, r.complete, r.peak_bytes, r.seed,
                 r.step_ms_median, r.steps, r.warmup, r.layout});
  std::vector<RunRelation> rel = relate(f);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    rows[i].peak_reduction_pct = rel[i].peak_reduction_pct;
    rows[i].step_overhead_pct = rel[i].step_overhead_pct;
    rows[i].grads_match_none = rel[i].grads_match_none;
    rows[i].cold = rel[i].cold;
    rows[i].frontier = rel[i].frontier;
  }
}

nlohmann::json comparison_json(const std::vector<ComparisonRow>& rows) {
  nlohmann::json a = nlohmann::json::array();
  auto opt = [](const auto& o) -> nlohmann::json { return o ? nlohmann::json(*o) : nlohmann::json(nullptr); };
  for (const auto& r : rows) {
    a.push_back({{"run", r.run},
                 {"dir", r.dir},
                 {"policy", r.policy},
                 {"params", r.params},
                 {"memory_budget_bytes", r.memory_budget},
                 {"status", r.status},
                 {"complete", r.complete},
                 {"model", r.model},
                 {"device", r.device},
                 {"seed", r.seed},
                 {"steps", r.steps},
                 {"warmup", r.warmup},
                 {"peak_bytes", r.peak_bytes},
                 {"predicted_peak_bytes", r.predicted_peak_bytes},
                 {"peak_reduction_pct", opt(r.peak_reduction_pct)},
                 {"step_time_ms_median", r.step_ms_median},
                 {"step_time_ms_spread", r.step_ms_spread},
                 {"step_overhead_pct", opt(r.step_overhead_pct)},
                 {"cold_step", r.cold},
                 {"recompute_flops", r.recompute_flops},
                 {"total_flops", r.total_flops},
                 {"block_forwards", r.block_forwards},
                 {"grad_checksum", r.grad_checksum},
                 {"grads_match_none", opt(r.grads_match_none)},
                 {"frontier", r.frontier},
                 {"layout", r.layout},
                 {"rank", r.rank < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.rank)}});
  }
  nlohmann::json frontier = nlohmann::json::array();
  for (const auto& r : rows)
    if (r.frontier) frontier.push_back(r.run);
  return {{"runs", a}, {"frontier", frontier}};
}

void write_comparison_csv(const std::vector<ComparisonRow>& rows, const std::string& path) {
  csv::Writer w(path, {"run", "dir", "policy", "params", "memory_budget_bytes", "status", "complete",
                       "model", "device", "seed", "steps", "warmup", "peak_bytes",
                       "predicted_peak_bytes", "peak_reduction_pct", "step_time_ms_median",
                       "step_time_ms_spread", "step_overhead_pct", "recompute_flops", "total_flops",
                       "block_forwards", "grad_checksum", "grads_match_none", "frontier"});
  for (const auto& r : rows) {
    w.str(r.run).str(r.dir).str(r.policy).str(r.params).u64(r.memory_budget).str(r.status)
        .i64(r.complete).str(r.model).str(r.device).u64(r.seed).i64(r.steps).i64(r.warmup)
        .u64(r.peak_bytes).u64(r.predicted_peak_bytes);
    if (r.peak_reduction_pct) w.f64(*r.peak_reduction_pct); else w.str("");
    w.f64(r.step_ms_median).f64(r.step_ms_spread);
    if (r.step_overhead_pct) w.f64(*r.step_overhead_pct); else w.str("");
    w.u64(r.recompute_flops).u64(r.total_flops).u64(r.block_forwards).str(r.grad_checksum);
    if (r.grads_match_none) w.i64(*r.grads_match_none); else w.str("");
    w.i64(r.frontier);
    w.end_row();
  }
  w.commit();
}

namespace {

std::string pct(const std::optional<double>& v, bool sign) {
  if (!v) return "-";
  char b[32];
  std::snprintf(b, sizeof b, sign ? "%+.1f%%" : "%.1f%%", *v);
  return b;
}

std::string si(std::uint64_t v) {
  if (v == 0) return "0";
  const char* u[] = {"", "k", "M", "G", "T", "P", "E"};
  double x = static_cast<double>(v);
  int i = 0;
  while (x >= 1000.0 && i < 6) {
    x /= 1000.0;
    ++i;
  }
  char b[32];
  std::snprintf(b, sizeof b, i ? "%.2f %s" : "%.0f%s", x, u[i]);
  return b;
}

std::string ms(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f ms", v);
  return b;
}

}  // namespace

void print_comparison(std::ostream& os, const std::vector<ComparisonRow>& rows, bool frontier) {
  bool any_bad = false;
  for (const auto& r : rows) any_bad = any_bad || !r.complete;
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> head = {"run", "peak memory", "reduction", "step time", "overhead",
                                   "recompute FLOPs", "grads = none"};
  if (any_bad) head.push_back("status");
  cells.push_back(head);
  for (const auto& r : rows) {
    std::vector<std::string> c;
    c.push_back(r.run);
    if (r.complete) {
      c.push_back(human_bytes(r.peak_bytes));
      c.push_back(pct(r.peak_reduction_pct, false));
      c.push_back(ms(r.step_ms_median));
      c.push_back(pct(r.step_overhead_pct, true));
      c.push_back(si(r.recompute_flops));
      c.push_back(r.grads_match_none ? (*r.grads_match_none ? "yes" : "NO") : "-");
    } else {
      for (int i = 0; i < 6; ++i) c.push_back("-");
    }
    if (any_bad) c.push_back(r.status);
    cells.push_back(c);
  }
  std::vector<std::size_t> width(head.size(), 0);
  for (const auto& row : cells)
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  for (std::size_t k = 0; k < cells.size(); ++k) {
    const auto& row = cells[k];
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i) os << "  ";
      if (i + 1 == row.size()) os << row[i];  // no padding after the last column
      else if (i == 0) os << std::left << std::setw(static_cast<int>(width[i])) << row[i];
      else os << std::right << std::setw(static_cast<int>(width[i])) << row[i];
    }
    os << std::left << "\n";
  }
  if (std::any_of(rows.begin(), rows.end(), [](const ComparisonRow& r) { return r.cold; }))
    os << "overhead -: one step without a warm-up (a recorded step) is a cold step, whose time says "
          "nothing of a step's; record or run more steps\n";
  if (!frontier) return;
  std::vector<const ComparisonRow*> by_peak;
  for (const auto& r : rows)
    if (r.complete) by_peak.push_back(&r);
  std::stable_sort(by_peak.begin(), by_peak.end(),
                   [](auto* a, auto* b) { return a->peak_bytes < b->peak_bytes; });
  std::size_t w0 = 3;
  for (auto* r : by_peak) w0 = std::max(w0, r->run.size());
  os << "\nmeasured memory/time frontier (* = no other run is both smaller and faster)\n";
  for (auto* r : by_peak) {
    os << (r->frontier ? "* " : "  ") << std::left << std::setw(static_cast<int>(w0)) << r->run << "  "
       << std::right << std::setw(12) << human_bytes(r->peak_bytes) << "  " << std::setw(12)
       << ms(r->step_ms_median);
    if (r->memory_budget) os << "  (budget " << human_bytes(r->memory_budget) << ")";
    os << std::left << "\n";
  }
}

}  // namespace remat::cli
