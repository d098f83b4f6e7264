#include "core/profiler/host_profiler.h"

namespace remat {

void HostProfiler::begin_op(const OpInfo& op) {
  if (op.stream == Stream::Comm) note_comm_start();
  begun_ = clock_.now_ns();
}

void HostProfiler::end_op(const OpInfo& op) { records_.push_back(timed_record(op, begun_, clock_.now_ns())); }

std::vector<OpRecord> HostProfiler::collect() {
  std::vector<OpRecord> out;
  out.swap(records_);
  return out;
}

}  // namespace remat
