// rematlab-batch plan --from-run DIR --policy PLAN: what checkpointing the chosen modules of a
// recorded PyTorch step would save and recompute (core/analysis/recorded_plan.h), nothing runs.
#include "plan_from_run.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/analysis/recorded_plan.h"

namespace remat::cli {

int plan_from_run(const std::string& dir, const std::string& plan_text, bool json) {
  const RecordedRun run = read_recorded_run(dir);
  const CheckpointPlanSpec plan = parse_checkpoint_plan(plan_text);
  const RecordedPrediction p = predict_recorded_plan(run, plan);
  if (json) {
    nlohmann::json j;
    j["from_run"] = dir;
    j["policy"] = plan.text;
    j["checkpointed"] = p.checkpointed;
    j["recorded_saved_bytes"] = p.recorded_saved_bytes;
    j["saved_bytes"] = p.saved_bytes;
    j["saved_bytes_per_block"] = p.saved_bytes_per_block;
    j["recomputed_blocks"] = p.recomputed_blocks;
    if (p.recompute_flops) j["recompute_flops"] = *p.recompute_flops;
    else j["recompute_flops"] = "unknown";
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
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "plan " << plan.text << " on the recorded run " << dir << "\n"
            << "checkpointed          " << p.checkpointed.size() << " module"
            << (p.checkpointed.size() == 1 ? "" : "s") << (p.checkpointed.empty() ? "" : " (" + p.checkpointed.front() +
                                                             (p.checkpointed.size() > 1 ? ", ...)" : ")"))
            << "\n"
            << "saved for backward    " << human_bytes(p.saved_bytes) << " (" << p.saved_bytes << " bytes), recorded "
            << human_bytes(p.recorded_saved_bytes) << " (" << p.recorded_saved_bytes << " bytes)\n"
            << "recompute FLOPs       " << (p.recompute_flops ? std::to_string(*p.recompute_flops) : "unknown") << "\n";
  if (!plan.keep.empty()) {
    std::cout << "kept op outputs       " << human_bytes(p.kept_output_bytes) << " (" << p.kept_output_bytes
              << " bytes)\n";
    if (p.recompute_flops)
      std::cout << "recomputed ops        " << p.recomputed_ops << ", " << p.recomputed_ops_without_flops
                << " of them without a FLOP count from the profiler (counted 0)\n";
    else
      std::cout << "recomputed ops        unknown (recorded without the profiler)\n";
  }
  return 0;
}

}  // namespace remat::cli
