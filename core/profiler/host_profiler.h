// Times each op on the host clock. The reference profiler of the CPU backend, where an op has
// finished when its call returns.
#pragma once
#include <vector>

#include "core/memory/tracking_allocator.h"
#include "core/profiler/profiler.h"

namespace remat {

class HostProfiler final : public Profiler {
 public:
  explicit HostProfiler(Clock& clock) : clock_(clock) {}
  void begin_op(const OpInfo& op) override;
  void end_op(const OpInfo& op) override;
  std::vector<OpRecord> collect() override;
  std::string name() const override { return "host"; }

 private:
  Clock& clock_;
  std::vector<OpRecord> records_;
  std::int64_t begun_ = 0;
};

}  // namespace remat
