#include "core/analysis/run_groups.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include "core/analysis/run_layout.h"

namespace remat {

namespace {

StepSpread spread_of(std::vector<double> v) {
  StepSpread s;
  s.steps = static_cast<int>(v.size());
  if (v.empty()) return s;
  const auto [mn, mx] = std::minmax_element(v.begin(), v.end());
  s.min = *mn;
  s.max = *mx;
  s.median = median(std::move(v));
  return s;
}

// Like runs: the same global model on the same device, laid out alike over ranks (a rank's
// memory is sharded: set against one process's it would read as a reduction no policy made).
// An imported trace has no model of ours: it is its own group, by its file.
std::string group_key(const Trace& t) {
  if (t.imported()) return "imported\n" + t.source + "\n" + imported_from(t);
  return model_to_json(global_model(t)).dump() + "\n" + t.device + "\n" + layout_label(run_layout(t));
}

}  // namespace

StepSpread step_time_spread(const Trace& t) { return spread_of(t.step_times_ms()); }

StepSpread step_peak_spread(const Trace& t) {
  std::vector<double> v;
  for (const StepStats& s : t.step_stats)
    if (s.counted) v.push_back(static_cast<double>(s.peak_bytes));
  return spread_of(std::move(v));
}

std::optional<Overhead> step_overhead(const StepSpread& run, const StepSpread& base) {
  if (run.steps == 0 || base.steps == 0 || base.median <= 0) return std::nullopt;
  Overhead o;
  o.pct = 100.0 * (run.median / base.median - 1.0);
  o.spread_known = run.steps >= 2 && base.steps >= 2;
  o.spread_pct = 100.0 * ((run.max - run.min) + (base.max - base.min)) / base.median;
  o.within_noise = !o.spread_known || o.spread_pct >= std::abs(o.pct);
  return o;
}

std::string imported_from(const Trace& t) {
  for (const auto& [k, v] : t.provenance)
    if (k == "imported_from") return v;
  return {};
}

std::string group_label(const Trace& t) {
  if (t.imported()) {
    const std::string file = imported_from(t);
    return (file.empty() ? std::string("an imported trace") : file) + " (" + t.source + ")";
  }
  const RunLayout l = run_layout(t);
  return t.model.name + " s" + std::to_string(t.model.seq) + " b" + std::to_string(global_model(t).batch) + " " +
         to_string(t.model.dtype) + " " + t.device + (l.distributed() ? " · " + layout_label(l) : std::string());
}

std::vector<RunGroup> group_runs(const std::vector<const Trace*>& runs) {
  std::vector<RunGroup> out;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Trace* t = runs[i];
    if (!t || !t->complete) continue;
    const std::string key = group_key(*t);
    auto g = std::find_if(out.begin(), out.end(), [&](const RunGroup& x) { return x.key == key; });
    if (g == out.end()) {
      out.push_back({key, group_label(*t), {}});
      g = out.end() - 1;
    }
    g->members.push_back(i);
  }
  return out;
}

std::string groups_banner(const std::vector<RunGroup>& groups) {
  if (groups.size() < 2) return {};
  std::string s = std::to_string(groups.size()) + " groups: ";
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const std::size_t n = groups[i].members.size();
    s += (i ? ", " : "") + groups[i].label + " (" + std::to_string(n) + (n == 1 ? " run)" : " runs)");
  }
  return s + "; each has its own scales and frontier";
}

}  // namespace remat
