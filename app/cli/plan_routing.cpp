#include "plan_routing.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli_common.h"
#include "core/analysis/run_layout.h"
#include "core/trace/run_dir.h"
#include "core/trace/trace.h"
#include "core/util/error.h"

namespace remat::cli {

namespace {

std::string fixed2(double v) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << v;
  return s.str();
}

const LayerLoad* most_imbalanced(const std::vector<LayerLoad>& loads) {
  const LayerLoad* w = nullptr;
  for (const auto& l : loads)
    if (!w || l.imbalance > w->imbalance) w = &l;
  return w;
}

// Whether the run measured what this plan predicts: the same model, policy and device.
bool comparable(const RecordedRouting& r, const ModelConfig& m, const Schedule& s, const std::string& device) {
  return r.status == "ok" && r.layout.empty() && r.device == device && r.policy == s.policy && r.params == s.params &&
         model_to_json(r.model) == model_to_json(m);
}

std::string why_one_rank(const ModelConfig& m) {
  return m.moe.capacity_factor > 0.0
             ? "one rank holds every expert's capacity block (" + std::to_string(m.moe.rows(m.tokens())) +
                   " rows a layer): the peak is the same under any routing"
             : "one rank holds every expert's rows in one buffer of tokens x top_k (" +
                   std::to_string(m.moe.rows(m.tokens())) + " rows a layer): the peak is the same under any routing";
}

}  // namespace

void RoutingOptions::add(CLI::App& app) {
  app.add_option("--routing-from", from,
                 "a run of a model with experts: predict with the routing it recorded (routing.csv); "
                 "without --model, the run's model")
      ->check(non_empty_path());
  app.add_option("--moe-imbalance", imbalance,
                 "assume routing this uneven: the most-loaded expert's tokens over the mean (1: balanced, "
                 "the default)");
}

RecordedRouting read_recorded_routing(const std::string& dir) {
  const std::string where = "--routing-from " + dir;
  Trace t;
  try {
    t = read_run_dir(dir);
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  if (t.imported()) throw Error(where + ": an imported " + t.source + " trace records no routing");
  if (provenance_int(t, "pp_world_size", 1) > 1)
    throw Error(where + ": a pipeline stage's rank (its routing is of its own blocks and micro-batches); "
                        "name a run of the whole model");
  check_routing_recorded(t.model, t.routing.size(), t.format_version, where);
  RecordedRouting r;
  r.dir = dir;
  r.model = t.model;
  r.policy = t.policy;
  r.params = t.policy_params;
  r.device = t.device;
  r.status = t.status;
  r.peak_bytes = t.peak_bytes;
  r.threads = std::max(1, provenance_int(t, "threads", 1));
  if (const RunLayout l = run_layout(t); l.distributed()) r.layout = layout_label(l);
  r.loads = layer_loads(t.routing, t.model.moe.experts);
  return r;
}

std::optional<RoutingAssumption> routing_assumption(const RoutingOptions& o, const ModelConfig& m,
                                                    std::optional<RecordedRouting> run) {
  if (o.imbalance && run) throw Error("--moe-imbalance and --routing-from: give one (a recorded run fixes the routing)");
  if (!m.moe.on()) {
    if (o.imbalance) throw Error("--moe-imbalance: the model " + m.name + " has no experts");
    if (run) throw Error("--routing-from: the model " + m.name + " has no experts");
    return std::nullopt;
  }
  RoutingAssumption a;
  if (run) {
    check_routing_model(run->model, m, "--routing-from " + run->dir);
    a.kind = "recorded";
    const LayerLoad* w = most_imbalanced(run->loads);
    a.imbalance = w ? w->imbalance : 1.0;
    a.run = std::move(run);
    return a;
  }
  if (o.imbalance) {
    const double f = *o.imbalance, hi = max_moe_imbalance(m.moe);
    if (!std::isfinite(f) || f < 1.0 || f > hi)
      throw Error("--moe-imbalance " + fixed2(f) + ": the most-loaded expert over the mean is between 1 (balanced) and " +
                  fixed2(hi) + " (experts " + std::to_string(m.moe.experts) + " / top_k " + std::to_string(m.moe.top_k) +
                  ": every token on one expert)");
    a.kind = "imbalance";
    a.imbalance = f;
    return a;
  }
  a.kind = "balanced";
  return a;
}

void print_routing(const RoutingAssumption& a, const ModelConfig& m, const Schedule& s, const std::string& device,
                   std::uint64_t predicted_peak) {
  const double mean = static_cast<double>(m.tokens()) * m.moe.top_k / m.moe.experts;
  std::cout << "routing               ";
  if (a.kind == "balanced")
    std::cout << "balanced assumed (" << fixed2(mean) << " tokens an expert a layer; --moe-imbalance or --routing-from "
              << "for another)\n";
  else if (a.kind == "imbalance")
    std::cout << "imbalance " << fixed2(a.imbalance) << " assumed (the most-loaded expert " << fixed2(a.imbalance * mean)
              << " tokens a layer, the mean " << fixed2(mean) << ")\n";
  else
    std::cout << "recorded in " << a.run->dir << " (" << a.run->loads.size()
              << (a.run->loads.size() == 1 ? " layer" : " layers") << " with experts)\n";
  std::cout << "                      " << why_one_rank(m) << "\n";
  if (!a.run) return;
  const RecordedRouting& r = *a.run;
  for (std::size_t i = 0; i < r.loads.size() && i < 8; ++i) {
    const LayerLoad& l = r.loads[i];
    std::cout << "  layer " << std::setw(3) << l.layer << "  busiest expert " << l.busiest << ": " << l.most << " of " << l.routed << " choices, imbalance "
              << fixed2(l.imbalance) << (l.kept < l.routed ? ", " + std::to_string(l.routed - l.kept) + " dropped" : "")
              << "\n";
  }
  if (r.loads.size() > 8) std::cout << "  ... " << r.loads.size() - 8 << " more (--json has every layer)\n";
  std::cout << "recorded run's peak   " << human_bytes(r.peak_bytes) << " (" << r.peak_bytes << " bytes, policy "
            << r.policy << (r.params.empty() ? "" : ":" + r.params) << " on " << r.device << ")";
  if (comparable(r, m, s, device))
    std::cout << "; predicted - measured = " << static_cast<std::int64_t>(predicted_peak - r.peak_bytes) << " bytes\n";
  else if (!r.layout.empty())
    std::cout << "; a rank of " << r.layout << " (its static memory is the layout's), so not compared\n";
  else
    std::cout << "; not this plan's model, policy or device, so not compared\n";
}

nlohmann::json routing_json(const RoutingAssumption& a, const ModelConfig& m, const Schedule& s,
                            const std::string& device, std::uint64_t predicted_peak) {
  nlohmann::json j = {{"assumption", a.kind}, {"imbalance", a.imbalance}, {"peak_depends_on_routing", false},
                      {"why", why_one_rank(m)}};
  if (!a.run) return j;
  const RecordedRouting& r = *a.run;
  j["from"] = r.dir;
  j["recorded_peak_bytes"] = r.peak_bytes;
  j["recorded_policy"] = r.policy + (r.params.empty() ? "" : ":" + r.params);
  j["comparable"] = comparable(r, m, s, device);
  if (j["comparable"]) j["predicted_minus_measured_bytes"] = static_cast<std::int64_t>(predicted_peak - r.peak_bytes);
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : r.loads)
    layers.push_back({{"micro_batch", l.micro_batch}, {"layer", l.layer}, {"busiest_expert", l.busiest},
                      {"most", l.most}, {"routed", l.routed}, {"kept", l.kept}, {"imbalance", l.imbalance}});
  j["layers"] = layers;
  return j;
}

}  // namespace remat::cli
