// Everything a run produced. Immutable once the run ends; written as a run directory and read
// back by the CLI and the desktop app (docs/trace-format.md).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/memory/tracking_allocator.h"
#include "core/model/model_config.h"
#include "core/schedule/schedule.h"
#include "core/schedule/validator.h"
#include "core/trace/records.h"

namespace remat {

// summary.json "format_version": the newest this RematLab writes and reads (the rule for a new
// version: core/trace/schema.h).
constexpr int kTraceFormatVersion = 6;
// Trace::status, every value a run ends with.
inline constexpr std::array<const char*, 4> kRunStatuses = {"ok", "cancelled", "out_of_memory", "error"};
// Trace::source: what recorded the trace, RematLab's own runs first.
inline constexpr std::array<const char*, 4> kTraceSources = {"rematlab", "pytorch", "pytorch-snapshot",
                                                             "pytorch-profiler"};
inline constexpr const char* kOwnSource = "rematlab";
// A training step recorded in PyTorch by python/rematlab: a schedule of its blocks, profiler FLOPs.
inline constexpr const char* kRecordedSource = "pytorch";

struct FlopCounts {
  std::uint64_t forward = 0, recompute = 0, backward = 0, other = 0;
  std::uint64_t total() const { return forward + recompute + backward + other; }
};

struct Trace {
  int format_version = kTraceFormatVersion;
  bool complete = true;      // false when the run stopped early (error, cancel, out of memory)
  std::string status = "ok";  // ok | cancelled | out_of_memory | error
  std::string error;
  // rematlab, a step recorded in PyTorch (pytorch), or an imported trace (pytorch-snapshot,
  // pytorch-profiler: no model, no schedule).
  std::string source = kOwnSource;
  bool imported() const { return source != kOwnSource && source != kRecordedSource; }

  ModelConfig model;
  std::string policy, policy_params;
  std::uint64_t memory_budget = 0;  // activation bytes the policy was planned for (0: none given)
  Schedule schedule;
  ScheduleStats plan;        // what the schedule says it will do (validator)
  std::string device;        // cpu | cuda
  std::uint64_t seed = 0;
  int warmup = 0, steps = 0;
  std::vector<std::pair<std::string, std::string>> provenance;

  std::vector<StepStats> step_stats;  // every step run, warmup included (counted = false)
  // The last counted step in full.
  std::vector<OpRecord> ops;
  std::vector<ScheduleRecord> schedule_records;
  std::vector<LedgerEntry> ledger;
  std::vector<RoutingRecord> routing;  // per micro-batch, MoE layer and expert, in that order
  std::vector<MemoryEvent> events;    // every allocation and free of the run
  std::vector<std::string> names;     // tensor names, indexed by MemoryEvent::tensor
  std::size_t step_first_event = 0;   // the last counted step's events start here
  std::size_t step_end_event = 0;     // ... and end before here (0: not recorded; by time then)
  std::int64_t step_start_ns = 0, step_end_ns = 0;

  // Figures.
  std::uint64_t peak_bytes = 0;            // highest tracked device bytes over counted steps
  std::uint64_t predicted_peak_bytes = 0;  // the simulator's
  std::uint64_t peak_reserved_bytes = 0;   // device bytes held from the system at the peak
  std::uint64_t static_bytes = 0;          // parameters, gradients, master weights, moments
  std::uint64_t activation_peak_bytes = 0; // highest saved + checkpoint + recompute bytes
  std::vector<std::uint64_t> saved_bytes_per_block, host_bytes_per_block;
  FlopCounts flops;                        // of the last counted step, counted from its ops
  std::uint64_t block_forwards = 0;
  std::uint64_t grad_checksum = 0;
  std::int64_t profiler_overhead_ns = 0;
  double startup_ms = 0.0;  // from the run's start to its first step (plan, data, memory, weights)
  // Where the start-up went, in order: (part, ms). The run's own parts add up to startup_ms;
  // a command may put the parts before the run (process, plugins, plan, device) first.
  std::vector<std::pair<std::string, double>> startup_breakdown_ms;
  std::vector<std::pair<std::string, std::uint64_t>> peak_tensors;  // largest alive at the peak

  std::vector<double> losses() const;        // counted steps
  std::vector<double> step_times_ms() const; // counted steps
  double median_step_ms() const;
};

double median(std::vector<double> v);

// A non-negative integer of the trace's provenance (`tp_world_size`, `stage_blocks`, ...), or
// `fallback` when the key is absent or its value is not one.
int provenance_int(const Trace& t, const char* key, int fallback);

}  // namespace remat
