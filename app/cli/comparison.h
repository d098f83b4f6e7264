// The comparison table of `sweep` and `compare`: peak memory and its reduction against the
// `none` run, median step time and its overhead against it, recompute FLOPs, and whether the
// gradients are bit-identical to the `none` run's. Built from traces only, so a sweep's table
// and `compare` on its directory agree figure for figure.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/trace/trace.h"

namespace remat::cli {

struct ComparisonRow {
  std::string run;  // label: the run's directory name
  std::string dir;
  std::string policy, params;
  std::uint64_t memory_budget = 0;
  std::string status;
  bool complete = false;
  std::string model, device;
  std::uint64_t seed = 0;
  int steps = 0, warmup = 0;
  std::uint64_t peak_bytes = 0, predicted_peak_bytes = 0;
  double step_ms_median = 0, step_ms_spread = 0;
  std::uint64_t recompute_flops = 0, total_flops = 0, block_forwards = 0;
  std::string grad_checksum;
  // Against the baseline (the first complete `none` run of the same model and device).
  std::optional<double> peak_reduction_pct, step_overhead_pct;
  std::optional<bool> grads_match_none;
  bool cold = false;      // no overhead: it or its baseline has one step and no warm-up (RunRelation)
  bool frontier = false;  // on the measured memory/time frontier (not dominated)
  std::string model_json;  // the global model (run_layout.h), to check that runs are comparable
  std::string layout = "1 rank";  // "tp 2 sp": how the run was laid out over ranks
  int rank = -1;                  // the rank it stands for (-1: a single process)
};

ComparisonRow comparison_row(const std::string& run, const std::string& dir, const Trace& t);
// Fills the columns that compare runs with each other.
void relate_rows(std::vector<ComparisonRow>& rows);

nlohmann::json comparison_json(const std::vector<ComparisonRow>& rows);
void write_comparison_csv(const std::vector<ComparisonRow>& rows, const std::string& path);
// The table; with `frontier`, also the runs by peak memory with the frontier marked.
void print_comparison(std::ostream& os, const std::vector<ComparisonRow>& rows, bool frontier);

}  // namespace remat::cli
