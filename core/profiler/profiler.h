// How the executor tells a profiler what it runs. The executor brackets every backend call with
// begin_op / end_op; the host profiler times the bracket, the CUDA profiler (CUPTI) pushes the
// op id as an external correlation id so each kernel is attributed to its op, block and phase.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dist/communicator.h"
#include "core/trace/records.h"

namespace remat {

struct OpInfo {
  std::uint64_t op_id = 0;
  std::string name;  // instance: "h3.attn.qkv"
  std::string op;    // step: "attn.qkv"
  std::int32_t block = -1;
  Phase phase = Phase::Forward;
  std::int32_t step = 0;
  std::uint64_t flops = 0;
  std::uint64_t bytes = 0;
  Stream stream = Stream::Compute;
};

// A group of ranks a collective can run on: its communicator and the group's global ranks
// (ascending). The profiler gives each collective (an op on Stream::Comm) the ranks of the group
// whose communicator it called.
struct CommGroup {
  const Communicator* comm = nullptr;
  std::vector<std::int32_t> ranks;
};

// The groups of a rank laid out as the runs of several ranks are (global rank = (pp_rank · D +
// dp_rank) · T + tp_rank): the data-parallel group `dp` (its rank is dp_rank), the
// tensor-parallel group `tp` (tp_rank), the pipeline group `pp` (pp_rank) and the pair of the
// first and the last stage `tie` (0 and 1); any may be null (one rank). A send or receive on the
// pipeline group spans this rank and its peer only.
std::vector<CommGroup> layout_groups(const Communicator* dp, const Communicator* tp,
                                     const Communicator* pp = nullptr, const Communicator* tie = nullptr);

class Profiler {
 public:
  virtual ~Profiler() = default;
  // The groups the run's collectives use (none: a collective gets no ranks).
  void set_comm_groups(std::vector<CommGroup> groups) { groups_ = std::move(groups); }
  virtual void begin_op(const OpInfo& op) = 0;
  virtual void end_op(const OpInfo& op) = 0;
  // Called after the backend synchronized at the end of a step; returns that step's records in
  // time order.
  virtual std::vector<OpRecord> collect() = 0;
  // What profiling itself cost (ns), if the profiler can tell.
  virtual std::int64_t overhead_ns() const { return 0; }
  virtual std::string name() const = 0;

 protected:
  // Around a collective: counts each group's records at its start; after it, the ranks of the
  // group that recorded one more (empty when none did).
  void note_comm_start();
  std::vector<std::int32_t> comm_ranks() const;
  // The record of `op` timed [start, end) on the run's clock (at least 1 ns), with its group's
  // ranks when it is a collective (call between note_comm_start and the next one).
  OpRecord timed_record(const OpInfo& op, std::int64_t start, std::int64_t end) const;

 private:
  std::vector<CommGroup> groups_;
  std::vector<std::size_t> counts_;
};

}  // namespace remat
