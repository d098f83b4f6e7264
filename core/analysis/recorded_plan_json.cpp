#include "core/analysis/recorded_plan_json.h"

namespace remat {

nlohmann::json prediction_json(const CheckpointPlanSpec& plan, const RecordedPrediction& p) {
  nlohmann::json j;
  j["policy"] = plan.text;
  j["checkpointed"] = p.checkpointed;
  j["recorded_saved_bytes"] = p.recorded_saved_bytes;
  j["saved_bytes"] = p.saved_bytes;
  j["saved_bytes_per_block"] = p.saved_bytes_per_block;
  j["recomputed_blocks"] = p.recomputed_blocks;
  if (p.recompute_flops) j["recompute_flops"] = *p.recompute_flops;
  else j["recompute_flops"] = "unknown";
  j["recorded_peak_bytes"] = p.recorded_peak_bytes;
  if (p.peak_bytes) {
    j["peak_bytes"] = *p.peak_bytes;
    j["held_peak_bytes"] = *p.held_peak_bytes;
  } else {  // a selective plan: its kept outputs' lifetimes are not recorded
    j["peak_bytes"] = "unknown";
    j["held_peak_bytes"] = "unknown";
  }
  if (!plan.keep.empty()) {
    j["keep"] = plan.keep;
    j["kept_output_bytes"] = p.kept_output_bytes;
    if (p.recompute_flops) {
      j["recomputed_ops"] = p.recomputed_ops;
      j["recomputed_ops_without_flops"] = p.recomputed_ops_without_flops;
    } else {  // recorded without the profiler: no ops
      j["recomputed_ops"] = "unknown";
      j["recomputed_ops_without_flops"] = "unknown";
    }
  }
  return j;
}

}  // namespace remat
