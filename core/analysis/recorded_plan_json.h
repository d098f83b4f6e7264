// A plan's prediction for a recorded PyTorch step as JSON: what `rematlab-batch plan --from-run
// --json` prints and the Python package's rematlab.predict returns (docs/batch.md).
#pragma once
#include <nlohmann/json.hpp>

#include "core/analysis/recorded_plan.h"

namespace remat {

nlohmann::json prediction_json(const CheckpointPlanSpec& plan, const RecordedPrediction& p);

}  // namespace remat
