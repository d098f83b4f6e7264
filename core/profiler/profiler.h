// How the executor tells a profiler what it runs. The executor brackets every backend call with
// begin_op / end_op; the host profiler times the bracket, the CUDA profiler (CUPTI) pushes the
// op id as an external correlation id so each kernel is attributed to its op, block and phase.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

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

class Profiler {
 public:
  virtual ~Profiler() = default;
  virtual void begin_op(const OpInfo& op) = 0;
  virtual void end_op(const OpInfo& op) = 0;
  // Called after the backend synchronized at the end of a step; returns that step's records in
  // time order.
  virtual std::vector<OpRecord> collect() = 0;
  // What profiling itself cost (ns), if the profiler can tell.
  virtual std::int64_t overhead_ns() const { return 0; }
  virtual std::string name() const = 0;
};

}  // namespace remat
