#include "core/trace/summary.h"
#include "core/trace/schema.h"

#include <algorithm>

#include "core/model/model_config.h"
#include "core/util/build_info.h"
#include "core/util/hash.h"


namespace remat {

std::string program_version() { return build_version(); }
std::string program_commit() { return build_commit(); }

nlohmann::json summary_json(const Trace& t) {
  nlohmann::json j;
  j["format"] = schema::kRunFormat;
  j["format_version"] = t.format_version;
  if (t.format_version >= 2) j["source"] = t.source;
  j["complete"] = t.complete;
  j["status"] = t.status;
  if (!t.error.empty()) j["error"] = t.error;
  j["model"] = model_to_json(t.model);
  // The fields of an imported config that change nothing (none in older versions).
  if (t.format_version >= 4) j["ignored_config_fields"] = t.model.ignored_fields;
  j["policy"] = t.policy;
  j["policy_params"] = t.policy_params;
  j["memory_budget_bytes"] = t.memory_budget;
  j["device"] = t.device;
  j["seed"] = t.seed;
  j["warmup"] = t.warmup;
  j["steps"] = t.steps;
  auto losses = t.losses();
  auto times = t.step_times_ms();
  j["loss"] = losses;
  j["step_time_ms"] = times;
  j["step_time_ms_median"] = median(times);
  if (!times.empty()) {
    auto [mn, mx] = std::minmax_element(times.begin(), times.end());
    j["step_time_ms_spread"] = *mx - *mn;
  } else {
    j["step_time_ms_spread"] = 0.0;
  }
  std::vector<std::uint64_t> peaks;
  for (const auto& s : t.step_stats)
    if (s.counted) peaks.push_back(s.peak_bytes);
  j["step_peak_bytes"] = peaks;
  if (!peaks.empty()) {
    auto [mn, mx] = std::minmax_element(peaks.begin(), peaks.end());
    j["step_peak_bytes_spread"] = *mx - *mn;
    std::vector<double> pd(peaks.begin(), peaks.end());
    j["step_peak_bytes_median"] = median(pd);
  }
  j["warmup_loss"] = nlohmann::json::array();
  for (const auto& s : t.step_stats)
    if (!s.counted) j["warmup_loss"].push_back(s.loss);
  j["peak_bytes"] = t.peak_bytes;
  j["predicted_peak_bytes"] = t.predicted_peak_bytes;
  j["peak_reserved_bytes"] = t.peak_reserved_bytes;
  j["static_bytes"] = t.static_bytes;
  j["activation_peak_bytes"] = t.activation_peak_bytes;
  j["saved_bytes_per_block"] = t.saved_bytes_per_block;
  j["host_bytes_per_block"] = t.host_bytes_per_block;
  j["flops"] = {{"forward", t.flops.forward}, {"recompute", t.flops.recompute},
                {"backward", t.flops.backward}, {"other", t.flops.other}, {"total", t.flops.total()}};
  j["block_forwards"] = t.block_forwards;
  j["plan"] = {{"block_forwards", t.plan.block_forwards},
               {"recompute_flops", t.plan.flops_recompute},
               {"max_checkpoints", t.plan.max_checkpoints},
               {"actions", t.schedule.actions.size()},
               {"first_forwards", t.plan.first_forwards},
               {"forward_flops", t.plan.flops_forward},
               {"backward_flops", t.plan.flops_backward},
               {"offloads", t.plan.offloads},
               {"prefetches", t.plan.prefetches}};
  // Where the last counted step lies in the events and on the run's clock (the timeline files).
  j["timeline"] = {{"first_event", t.step_first_event}, {"end_event", t.step_end_event},
                   {"start_ns", t.step_start_ns}, {"end_ns", t.step_end_ns}};
  j["grad_checksum"] = hex64(t.grad_checksum);
  j["profiler_overhead_ns"] = t.profiler_overhead_ns;
  if (t.startup_ms > 0.0) j["startup_ms"] = t.startup_ms;  // unknown (0) in older run directories
  if (!t.startup_breakdown_ms.empty()) {
    nlohmann::json parts = nlohmann::json::object();
    for (const auto& [part, ms] : t.startup_breakdown_ms) parts[part] = ms;
    j["startup_breakdown_ms"] = parts;
  }
  nlohmann::json pt = nlohmann::json::array();
  for (const auto& [n, b] : t.peak_tensors) pt.push_back({{"tensor", n}, {"bytes", b}});
  j["peak_tensors"] = pt;
  nlohmann::json prov = {{"program", "rematlab"}, {"version", program_version()}, {"git_commit", program_commit()}};
  for (const auto& [k, v] : t.provenance) prov[k] = v;
  j["provenance"] = prov;
  return j;
}

}  // namespace remat
