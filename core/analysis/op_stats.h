// Time per op type, per kernel and per block over the step or a time range of it (a trace
// viewer's statistics and its area selection): count, total, mean, min and max duration, the
// share of the step's time, and the same time split by phase (forward, recompute, backward,
// optimizer), so what recomputation cost each op type and each block reads off one column.
// Written as CSV with the run directories' writer.
#pragma once
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/trace/trace.h"

namespace remat {

// OpRecord::op, OpRecord::name, or the block ("h3"; kOutsideBlocks for ops of no block).
enum class OpStatKey : std::uint8_t { OpType, Kernel, Block };
inline constexpr const char* kOutsideBlocks = "outside the blocks";

struct OpStat {
  std::string key;
  std::uint64_t count = 0;
  std::int64_t total_ns = 0;
  std::int64_t min_ns = std::numeric_limits<std::int64_t>::max(), max_ns = 0;
  std::uint64_t flops = 0, bytes = 0;
  // The total split by the ops' phase, and their count and FLOPs per phase.
  std::array<std::int64_t, kNumPhases> phase_ns{};
  std::array<std::uint64_t, kNumPhases> phase_count{}, phase_flops{};
  double mean_ns() const { return count ? static_cast<double>(total_ns) / static_cast<double>(count) : 0.0; }
  std::int64_t in(Phase p) const { return phase_ns[static_cast<std::size_t>(p)]; }
  // What recomputation cost: the time of the ops run again in the recompute phase.
  std::int64_t recompute_ns() const { return in(Phase::Recompute); }
};

struct OpStatsFilter {
  // Ops that overlap [t0, t1] (both inclusive); the default takes every op.
  std::int64_t t0 = std::numeric_limits<std::int64_t>::min();
  std::int64_t t1 = std::numeric_limits<std::int64_t>::max();
  bool compute_only = false;  // only Stream::Compute
};

// Sorted by total time, longest first (ties by key); by block, in block order instead (the
// ops outside the blocks last).
std::vector<OpStat> op_stats(const Trace& t, OpStatKey key, const OpStatsFilter& f = {});
// The sum of the rows: every op counted once (its key "total").
OpStat op_stats_total(const std::vector<OpStat>& stats);

// The step's length that shares are taken of: step_end_ns - step_start_ns when recorded, else
// the span of the ops.
std::int64_t step_length_ns(const Trace& t);

// The phases the statistics split time into, in their columns' order.
inline constexpr std::array<Phase, 4> kStatPhases = {Phase::Forward, Phase::Recompute, Phase::Backward, Phase::Optimizer};

// key,count,total_us,forward_us,recompute_us,backward_us,optimizer_us,mean_us,min_us,max_us,
// share_of_step,recompute_share_of_step,flops,recompute_flops,bytes; throws Error when the file
// cannot be written.
void write_op_stats_csv(const std::string& path, const std::vector<OpStat>& stats, std::int64_t step_ns);

}  // namespace remat
