// The phases of the last counted step over time (forward, recompute, backward, optimizer), for
// shading the memory timeline: consecutive ops of one phase merged into one span.
#pragma once
#include <cstdint>
#include <vector>

#include "core/trace/trace.h"

namespace remat {

struct PhaseSpan {
  Phase phase = Phase::Forward;
  std::int64_t start_ns = 0, end_ns = 0;
};

// From the ops of the step (any stream) in time order; gaps between ops of the same phase are
// closed, and a span ends where the next phase's first op starts.
std::vector<PhaseSpan> phase_spans(const Trace& t);

}  // namespace remat
