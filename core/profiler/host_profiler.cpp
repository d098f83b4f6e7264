#include "core/profiler/host_profiler.h"

namespace remat {

void HostProfiler::begin_op(const OpInfo& op) {
  if (op.stream == Stream::Comm) note_comm_start();
  begun_ = clock_.now_ns();
}

void HostProfiler::end_op(const OpInfo& op) {
  OpRecord r;
  r.start_ns = begun_;
  r.end_ns = clock_.now_ns();
  if (r.end_ns <= r.start_ns) r.end_ns = r.start_ns + 1;
  r.stream = op.stream;
  r.name = op.name;
  r.op = op.op;
  r.block = op.block;
  r.phase = op.phase;
  r.step = op.step;
  r.flops = op.flops;
  r.bytes = op.bytes;
  r.op_id = op.op_id;
  if (op.stream == Stream::Comm) r.ranks = comm_ranks();
  records_.push_back(std::move(r));
}

std::vector<OpRecord> HostProfiler::collect() {
  std::vector<OpRecord> out;
  out.swap(records_);
  return out;
}

}  // namespace remat
