// What the compare view needs to put only like runs side by side: runs grouped by what they
// trained and where (the model's whole configuration, the device and the layout over ranks), a
// short label per group ("small s128 b4 bf16 cpu"), the spread of a figure over
// the counted steps (median, min, max), and whether a step-time overhead against the group's
// `none` run is larger than the noise of the two runs.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/trace/trace.h"

namespace remat {

// A figure over the counted steps: the median and the lowest and highest step.
struct StepSpread {
  double median = 0, min = 0, max = 0;
  int steps = 0;  // counted steps it is taken over
};
StepSpread step_time_spread(const Trace& t);  // milliseconds
StepSpread step_peak_spread(const Trace& t);  // bytes; median of the per-step peaks

// The overhead of `run`'s median step time against `base`'s, and how far the two runs' step
// times spread: the width of both min-max ranges relative to the baseline's median. The
// overhead is within noise when that spread is at least as large as the overhead itself, or
// when either run has fewer than two counted steps (no spread can be measured).
struct Overhead {
  double pct = 0, spread_pct = 0;
  bool within_noise = false;
  bool spread_known = false;  // both runs have two or more counted steps
};
std::optional<Overhead> step_overhead(const StepSpread& run, const StepSpread& base);

// "small s128 b4 bf16 cpu": model name, sequence, batch (global: a rank's times D), dtype, device,
// and the layout of a rank ("tiny s64 b4 fp32 cpu · tp 2 sp"); an imported trace, which has no
// model of ours: its file and source ("trace.json (pytorch-profiler)").
std::string group_label(const Trace& t);
// The file an imported trace came from (provenance `imported_from`), "" for none.
std::string imported_from(const Trace& t);

struct RunGroup {
  std::string key;    // the model's configuration and the device
  std::string label;  // group_label of its first run
  std::vector<std::size_t> members;  // indices into the runs, in their order
};
// Complete runs grouped by model configuration, device and layout over ranks (each imported
// trace alone), groups in order of their first run; incomplete runs (null or !complete) are
// left out.
std::vector<RunGroup> group_runs(const std::vector<const Trace*>& runs);

// "2 groups: small s128 b4 bf16 cpu (5 runs), tiny s64 b4 bf16 cpu (1 run); each has its own
// scales and frontier"; empty for one group or none.
std::string groups_banner(const std::vector<RunGroup>& groups);

}  // namespace remat
