// The peak of a recorded PyTorch step's tracked memory under a checkpoint plan, by replaying the
// recording's memory events (core/analysis/recorded_plan.h) with the plan's changes:
//  - a storage that only modules inside a checkpointed region saved is not held;
//  - a region's inputs are held from its first module's call until the last of the region's
//    saved tensors is released in the recording (its backward's end), as
//    torch.utils.checkpoint holds them;
//  - with the recompute: when the backward first uses a region (the first unpack of one of its
//    saved tensors in the recording), the storages the region saved that are not alive then
//    are made again and held until the region's backward ends (torch.utils.checkpoint keeps a
//    region's recomputed tensors together until then; torch 1.13 does, and later versions free
//    them no later).
// Parameters, gradients and optimizer state keep their recorded events. A storage's life under
// the plan runs from a holder's save to the last release of the holders whose times overlap
// it (a storage id used again after its release starts a new life).
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/analysis/recorded_plan.h"

namespace remat {

// One checkpoint of the plan: the module paths it runs (a path's submodules included) during
// its forward [from, to] (so a module called twice is two checkpoints), and the calls whose
// tensor arguments it keeps.
struct PlanRegion {
  std::vector<std::string> prefixes;
  std::vector<const RecordedCall*> heads;
  std::int64_t from = 0, to = std::numeric_limits<std::int64_t>::max();
};

struct RecordedPeak {
  std::uint64_t held = 0;            // what a recording of the planned step measures as its peak
  std::uint64_t with_recompute = 0;  // ... plus the recomputed tensors
};

// `keep_inputs` false: the step held nothing for backward (it ran without autograd), so a
// checkpoint keeps nothing either.
RecordedPeak replay_peak(const RecordedRun& run, const std::vector<PlanRegion>& regions, bool keep_inputs);

// Whether `module` is `prefix` or inside it.
bool module_inside(const std::string& module, const std::string& prefix);

}  // namespace remat
