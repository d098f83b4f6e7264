// Checks a schedule against a block table before anything runs, and counts what it will do.
// Rejects the first illegal action with its index and the reason.
#pragma once
#include <cstdint>

#include "core/graph/block_graph.h"
#include "core/schedule/schedule.h"

namespace remat {

struct ScheduleStats {
  std::uint64_t block_forwards = 0;    // forward and recompute actions (each runs a block forward)
  std::uint64_t first_forwards = 0;    // forward actions of blocks not forwarded before
  std::uint64_t flops_forward = 0;     // blocks only; the head and embedding are separate
  std::uint64_t flops_recompute = 0;
  std::uint64_t flops_backward = 0;
  int max_checkpoints = 0;             // most block inputs held as checkpoints at once
  std::uint64_t offloads = 0, prefetches = 0;
};

// Throws ScheduleError(index, reason).
ScheduleStats validate_schedule(const Schedule& s, const BlockGraph& g);

}  // namespace remat
