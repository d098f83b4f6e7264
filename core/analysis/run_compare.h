// Figures that relate runs to each other, for the desktop app's compare view: the overhead of
// each run's median step time and its peak-memory reduction against the `none` run of the same
// model and device (the first complete one, as the batch mode's comparison table takes it), and
// whether a run is on the measured memory/time frontier (no other run is at least as good in
// both and better in one).
#pragma once
#include <optional>
#include <vector>

#include "core/trace/trace.h"

namespace remat {

struct RunRelation {
  int baseline = -1;  // index of the `none` run it is measured against, -1 when there is none
  std::optional<double> step_overhead_pct, peak_reduction_pct;
  bool frontier = false;
};

std::vector<RunRelation> relate_runs(const std::vector<const Trace*>& runs);

// Whether two runs trained the same model (every field of the configuration).
bool same_model(const ModelConfig& a, const ModelConfig& b);

}  // namespace remat
