// Time per op type and per kernel over the step or a time range of it (a trace viewer's
// statistics and its area selection): count, total, mean, min and max duration, and the share
// of the step's time. Written as CSV with the run directories' writer.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/trace/trace.h"

namespace remat {

enum class OpStatKey : std::uint8_t { OpType, Kernel };  // OpRecord::op or OpRecord::name

struct OpStat {
  std::string key;
  std::uint64_t count = 0;
  std::int64_t total_ns = 0;
  std::int64_t min_ns = std::numeric_limits<std::int64_t>::max(), max_ns = 0;
  std::uint64_t flops = 0, bytes = 0;
  double mean_ns() const { return count ? static_cast<double>(total_ns) / static_cast<double>(count) : 0.0; }
};

struct OpStatsFilter {
  // Ops that overlap [t0, t1] (both inclusive); the default takes every op.
  std::int64_t t0 = std::numeric_limits<std::int64_t>::min();
  std::int64_t t1 = std::numeric_limits<std::int64_t>::max();
  bool compute_only = false;  // only Stream::Compute
};

// Sorted by total time, longest first (ties by key).
std::vector<OpStat> op_stats(const Trace& t, OpStatKey key, const OpStatsFilter& f = {});

// The step's length that shares are taken of: step_end_ns - step_start_ns when recorded, else
// the span of the ops.
std::int64_t step_length_ns(const Trace& t);

// key,count,total_us,mean_us,min_us,max_us,share_of_step,flops,bytes; throws Error when the
// file cannot be written.
void write_op_stats_csv(const std::string& path, const std::vector<OpStat>& stats, std::int64_t step_ns);

}  // namespace remat
