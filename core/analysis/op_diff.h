// Two runs' steps op by op: the ops of the last counted step of each matched by stream, name,
// block and phase (the k-th such op of one run with the k-th of the other), so what the second
// run added (its recomputation, say), removed, or ran faster or slower reads off one list in the
// first run's order, with the sums per phase. Only like runs are diffed: the same source, the
// same model (every field but its name; not compared for imported traces, whose model is a
// placeholder), the same layout over ranks and rank; otherwise diff_refusal says what differs.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/trace/trace.h"

namespace remat {

enum class DiffStatus : std::uint8_t { Matched, Added, Removed };
const char* to_string(DiffStatus s);

struct DiffRow {
  DiffStatus status = DiffStatus::Matched;
  Stream stream = Stream::Compute;
  Phase phase = Phase::Forward;
  std::int32_t block = -1;      // the whole model's block (block_names.h), -1 outside the blocks
  std::uint32_t occurrence = 0;  // the k-th op of this stream, name, block and phase in its run
  std::string name, op;          // name as the views show it ("h3.mlp.fc"), op type
  std::int64_t a = -1, b = -1;   // index into each run's Trace::ops; -1 where it has none
  std::int64_t a_start = 0, a_ns = 0, b_start = 0, b_ns = 0;  // since each step's start
  std::int64_t delta_ns() const { return b_ns - a_ns; }  // a missing side counts 0
};

struct PhaseDiff {
  std::int64_t a_ns = 0, b_ns = 0;  // the ops' summed time in each run
  std::uint64_t a_ops = 0, b_ops = 0;
  std::uint64_t added = 0, removed = 0;
  std::int64_t added_ns = 0, removed_ns = 0;
  std::int64_t matched_delta_ns = 0;  // b - a over the matched ops
};

struct OpDiff {
  std::vector<DiffRow> rows;  // the first run's order, each added op after the op before it in the second
  std::array<PhaseDiff, kNumPhases> phases{};
  std::uint64_t matched = 0, added = 0, removed = 0;
  std::int64_t a_step_ns = 0, b_step_ns = 0;  // step lengths (op_stats.h's step_length_ns)
  std::vector<std::string> notes;  // what differs but does not stop the diff (the device)
};

// Empty when the two may be diffed; else one line per difference ("model: hidden 64 against
// 128", "layout: tp 2 sp, rank 0 against 1 rank", "source: ...").
std::vector<std::string> diff_refusal(const Trace& a, const Trace& b);
// Throws Error listing diff_refusal's lines when the runs are not alike.
OpDiff op_diff(const Trace& a, const Trace& b);

// One row per matched or unmatched op: status,stream,phase,block,name,op,occurrence,
// a_start_us,a_us,b_start_us,b_us,delta_us (empty where a side has no op). Throws Error when the
// file cannot be written.
void write_op_diff_csv(const std::string& path, const OpDiff& d);

}  // namespace remat
