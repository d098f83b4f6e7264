#include "core/profiler/profiler.h"

#include <algorithm>

namespace remat {

OpRecord Profiler::timed_record(const OpInfo& op, std::int64_t start, std::int64_t end) const {
  OpRecord r;
  r.start_ns = start;
  r.end_ns = std::max(end, start + 1);
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
  return r;
}

}  // namespace remat
