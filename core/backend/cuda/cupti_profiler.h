// The CUDA profiler, in layers after kineto's design: CuptiApi (the calls, replaceable in
// tests), ActivityBuffers (CUPTI's buffer callbacks), ActivityDecoder (records -> OpRecord),
// and this class, which ties them to the executor's begin_op / end_op.
//
// begin_op pushes the op id as a CUSTOM0 external correlation id and end_op pops it, so every
// API call in between (kernel launches, copies, memsets, allocations) is tagged with it. A
// collective (an op on Stream::Comm) is one record timed by its call, which returns once NCCL's
// stream has run it, with its group's ranks (Profiler::comm_ranks); the kernels and copies
// CUPTI saw of it, and any kernel named nccl*, are not listed beside it.
// collect() (after the backend synchronized) force-flushes CUPTI, decodes every completed
// buffer, and returns the step's records sorted by time on the run's clock: the CUPTI clock is
// calibrated against `clock` at start and again at each collect (midpoint of two clock reads
// around cuptiGetTimestamp, best of several tries).
//
// Record mode: with REMAT_CUPTI_RECORD_DIR=dir (or a record_dir argument) every completed
// buffer is also written to dir/buffer_NNN.bin (+ .idx) and the ops to dir/ops.tsv, so a real
// run's buffers become test data (see cupti_decode.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/backend/cuda/cupti_api.h"
#include "core/backend/cuda/cupti_buffers.h"
#include "core/backend/cuda/cupti_decode.h"
#include "core/memory/tracking_allocator.h"
#include "core/profiler/profiler.h"

namespace remat::cupti {

struct ProfilerStats {
  std::uint64_t buffers = 0, records = 0, dropped = 0, recorded_files = 0;
  std::uint64_t walker_mismatches = 0;  // record mode: our record sizes vs CUPTI's walk
  std::string kinds_not_enabled;        // optional kinds CUPTI refused, with the reason
  DecodeStats decode;
};

class CuptiProfiler final : public Profiler {
 public:
  // record_dir: empty = take REMAT_CUPTI_RECORD_DIR from the environment (if set).
  CuptiProfiler(std::unique_ptr<CuptiApi> api, Clock& clock, std::string record_dir = {},
                std::size_t buffer_bytes = std::size_t{4} << 20);
  ~CuptiProfiler() override;
  CuptiProfiler(const CuptiProfiler&) = delete;
  CuptiProfiler& operator=(const CuptiProfiler&) = delete;

  void begin_op(const OpInfo& op) override;
  void end_op(const OpInfo& op) override;
  std::vector<OpRecord> collect() override;
  std::int64_t overhead_ns() const override;
  std::string name() const override { return "cupti"; }

  const ProfilerStats& stats() const { return stats_; }
  std::int64_t clock_offset_ns() const { return offset_ns_; }
  const std::string& record_dir() const { return record_dir_; }

 private:
  void check(CUptiResult r, const char* call);
  void calibrate();

  std::unique_ptr<CuptiApi> api_;
  Clock& clock_;
  std::string record_dir_;
  ActivityBuffers buffers_;
  ActivityDecoder decoder_;
  OpTable ops_, prev_ops_;
  std::int64_t offset_ns_ = 0;
  std::int64_t overhead_ns_ = 0;
  std::int32_t last_step_ = 0;
  // Collectives (ops on Stream::Comm): timed by their call, with their group's ranks.
  std::vector<OpRecord> comm_;
  std::int64_t comm_begun_ = 0;
  std::unordered_set<std::uint64_t> comm_ids_, prev_comm_ids_;
  unsigned next_file_ = 0;
  bool enabled_ = false;
  ProfilerStats stats_;
};

}  // namespace remat::cupti
