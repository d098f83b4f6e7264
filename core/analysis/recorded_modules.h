// The bytes each module of a recorded PyTorch step (core/analysis/recorded_plan.h) held for
// backward: what the Analysis page shows for a recording in place of the block formula, which
// needs a RematLab model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/recorded_plan.h"

namespace remat {

struct ModuleSavedBytes {
  std::string module;
  int block = -1;
  std::uint64_t tensors = 0;  // saved tensors of the module held at backward (parameters left out)
  std::uint64_t bytes = 0;    // their storages' bytes, each storage counted once
};

// One row per module that held something, in the order the modules first saved a tensor. A
// storage saved by several modules is charged to the first, so the rows sum to the bytes the
// recorded step held for backward (RecordedPrediction::recorded_saved_bytes).
std::vector<ModuleSavedBytes> saved_bytes_per_module(const RecordedRun& run);

}  // namespace remat
