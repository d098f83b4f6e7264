// `plan --device cpu|cuda [--gpu-memory SIZE]`: the backend a plan is for. The CPU (default) is
// the backend this machine runs; `cuda` predicts what a CUDA rank allocates without a GPU at hand
// (core/backend/null/cuda_target.h): the CUDA backend's workspace and its caching allocator's
// reserved bytes, and with --gpu-memory whether that fits. Not measured on a GPU by this command.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <nlohmann/json.hpp>

#include "core/backend/backend.h"
#include "core/schedule/schedule.h"

namespace remat::cli {

struct TargetOptions {
  std::string device = "cpu";
  std::string gpu_memory;
  int cpu_threads = 1;  // the CPU backend's lanes (their workspaces): 1, or a recorded run's
  void add(CLI::App& app);
  // The backend whose sizes the prediction takes. Throws Error for --gpu-memory without cuda.
  std::unique_ptr<Backend> backend() const;
  bool cuda() const { return device == "cuda"; }
  std::optional<std::uint64_t> capacity() const;  // --gpu-memory, parsed
};

// What a prediction says about its target: `reserved` 0 where it was not predicted.
struct TargetFigures {
  std::uint64_t peak = 0, workspace = 0, reserved = 0;  // peak and reserved: the most of any rank
  std::uint64_t reserved_rank_peak = 0;  // the peak of the rank that reserves the most
  std::uint64_t rounded_peak = 0;  // the most live blocks take, rounded to their classes (any rank)
  bool host_copies = false;        // the schedule offloads: reserved is the least the allocator holds
  std::string why_no_reserved;  // said instead of the reserved bytes where they are 0
  std::string where;            // of a layout's ranks, which one these are (" on stage 3")
};

// Whether a schedule moves tensors to the host (its reserved bytes then a least figure).
bool moves_to_host(const Schedule& s);

// The lines about the target after plan's text (nothing for the CPU), and its JSON fields.
void print_target(const TargetOptions& o, const TargetFigures& f);
void target_json(const TargetOptions& o, const TargetFigures& f, nlohmann::json& j);

}  // namespace remat::cli
