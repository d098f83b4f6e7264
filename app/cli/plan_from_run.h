// rematlab-batch plan --from-run DIR: a checkpoint plan predicted from a recorded PyTorch step.
#pragma once
#include <string>

namespace remat::cli {

// Prints the prediction (JSON with `json`); returns the exit code.
int plan_from_run(const std::string& dir, const std::string& plan, bool json);

}  // namespace remat::cli
