// Figures that relate runs to each other, shared by the batch mode's comparison table and the
// desktop app's compare view: the overhead of each run's median step time and its peak-memory
// reduction against the `none` run of the same model and device (the first complete one),
// whether its gradients are bit-identical to that run's (same seed and steps only), and whether
// it is on the measured memory/time frontier of its model and device (no other run of the same
// model and device is at least as good in both and better in one). A run of one step without
// a warm-up (a recording) has a cold step time: no overhead against it or of it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/trace/trace.h"

namespace remat {

// What the relation needs of a run.
struct RunFigures {
  std::string policy, model_key, device, grad_checksum;
  bool complete = false;
  std::uint64_t peak_bytes = 0, seed = 0;
  double step_ms = 0.0;  // median
  int steps = 0, warmup = 0;
  // The layout over ranks (run_layout.h: "1 rank", "tp 2 sp"); gradients are compared only
  // between runs of the same layout (a rank holds its own shard of them).
  std::string layout = "1 rank";
};
// model_key: the global model (run_layout.h), so a rank of a distributed run and a single
// process that train the same model share a baseline.
RunFigures run_figures(const Trace& t);

struct RunRelation {
  int baseline = -1;  // index of the `none` run it is measured against, -1 when there is none
  // The overhead is left out (and `cold` set) where the run or its baseline has one step and no
  // warm-up (a recorded PyTorch step): one cold step's time says nothing of a step's.
  std::optional<double> step_overhead_pct, peak_reduction_pct;
  bool cold = false;
  std::optional<bool> grads_match_none;
  bool frontier = false;
};

std::vector<RunRelation> relate(const std::vector<RunFigures>& runs);
std::vector<RunRelation> relate_runs(const std::vector<const Trace*>& runs);

// Whether two runs trained the same model (every field of the configuration).
bool same_model(const ModelConfig& a, const ModelConfig& b);

}  // namespace remat
