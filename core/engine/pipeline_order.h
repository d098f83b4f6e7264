// The order in which one pipeline stage runs its micro-batches under 1F1B (PipeDream-Flush, as
// Megatron-LM schedules it): stage p of P runs min(P − p − 1, N) warm-up forwards, then
// alternates one forward and one backward until every forward has run, then the remaining
// backwards. Micro-batches go forward and backward in order 0, 1, ..., N − 1.
#pragma once
#include <vector>

namespace remat {

struct PipelineItem {
  bool forward = true;
  int micro = 0;
  bool operator==(const PipelineItem&) const = default;
};

// Stage `stage` (0 <= stage < stages) of `stages`, `micro_batches` >= 1 per step: 2·N items.
// Throws Error for arguments outside those ranges.
std::vector<PipelineItem> pipeline_order(int stages, int stage, int micro_batches);

// The most micro-batches whose forward has run and whose backward has not, at any point of
// `order`: min(P − p, N) for 1F1B.
int in_flight(const std::vector<PipelineItem>& order);

}  // namespace remat
