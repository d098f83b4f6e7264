// What is alive at a run's peak: every device allocation live at the instant the memory
// timeline reaches its highest device total (core/analysis/memory_timeline.h), with what it is
// and why it is still there. Their bytes sum to the peak for the runs this engine records (every
// free pairs with its allocation); an imported trace that frees memory it never saw allocated
// says by how much the two differ.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/trace/trace.h"

namespace remat {

struct PeakTensor {
  std::string label;      // "h3.attn.probs" (a pipeline stage's block as the whole model numbers it)
  std::uint64_t bytes = 0;
  std::uint64_t id = 0;   // the allocation's id in memory_events
  Category category = Category::Unknown;
  std::int32_t block = -1;  // as recorded
  Phase phase = Phase::Init;  // allocated in
  std::int64_t alloc_ns = 0, free_ns = -1;  // -1: never freed
  std::string why;        // why it is alive at the peak
};

struct PeakAlive {
  bool found = false;          // false: the run has no memory events in its timeline
  std::int64_t t_ns = 0;       // the peak instant
  std::int64_t event = -1;     // the event after which it holds (-1: the step's baseline)
  std::uint64_t peak_bytes = 0;  // the timeline's device total there
  std::uint64_t sum_bytes = 0;   // of `tensors`
  std::string op;              // the compute op running then ("" when none)
  Phase phase = Phase::Init;   // ... and its phase
  std::vector<PeakTensor> tensors;  // largest first (ties: allocation order)
};

PeakAlive peak_alive(const Trace& t);

}  // namespace remat
