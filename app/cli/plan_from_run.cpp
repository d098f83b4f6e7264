// rematlab-batch plan --from-run DIR --policy PLAN: what checkpointing the chosen modules of a
// recorded PyTorch step would save and recompute (core/analysis/recorded_plan.h), nothing runs.
#include "plan_from_run.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/analysis/recorded_plan.h"
#include "core/analysis/recorded_plan_json.h"

namespace remat::cli {

int plan_from_run(const std::string& dir, const std::string& plan_text, bool json) {
  const RecordedRun run = read_recorded_run(dir);
  const CheckpointPlanSpec plan = parse_checkpoint_plan(plan_text);
  const RecordedPrediction p = predict_recorded_plan(run, plan);
  if (json) {
    nlohmann::json j = prediction_json(plan, p);
    j["from_run"] = dir;
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
  if (p.peak_bytes)
    std::cout << "peak                  " << human_bytes(*p.peak_bytes) << " (" << *p.peak_bytes
              << " bytes) with the recompute, " << human_bytes(*p.held_peak_bytes) << " without it (what a recording"
              << " of the planned step measures), recorded " << human_bytes(p.recorded_peak_bytes) << "\n";
  else
    std::cout << "peak                  not predicted for a selective plan (the kept outputs' lifetimes are not"
              << " recorded), recorded " << human_bytes(p.recorded_peak_bytes) << "\n";
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
