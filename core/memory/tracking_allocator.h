// Every byte of device and host memory a run uses goes through here. Each allocation and free
// is recorded with time, bytes, category, block, tensor name, phase, space and step.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/backend/tensor.h"
#include "core/memory/categories.h"
#include "core/memory/memory_resource.h"

namespace remat {

// Time source for events; the simulator uses a logical clock so its output is reproducible.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::int64_t now_ns() = 0;
};

class SteadyClock final : public Clock {
 public:
  SteadyClock() : start_(std::chrono::steady_clock::now()) {}
  std::int64_t now_ns() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                start_)
        .count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

class LogicalClock final : public Clock {
 public:
  std::int64_t now_ns() override { return ticks_++; }

 private:
  std::int64_t ticks_ = 0;
};

struct AllocTag {
  Category category = Category::Workspace;
  int block = -1;  // -1: outside the blocks
  std::string tensor;
};

struct MemoryEvent {
  std::int64_t t_ns = 0;
  std::int64_t delta = 0;  // +bytes on allocation, -bytes on free
  std::uint64_t id = 0;
  Category category = Category::Workspace;
  Phase phase = Phase::Init;
  Space space = Space::Device;
  std::int32_t block = -1;
  std::uint32_t tensor = 0;  // index into names()
  std::int32_t step = -1;    // -1 before the first step
  std::uint64_t reserved = 0;  // device bytes held from the system after this event
  std::uint64_t op_seq = 0;    // id of the next op to begin (asynchronous backends re-time by it)
};

class TrackingAllocator {
 public:
  TrackingAllocator(MemoryResource& device, MemoryResource& host, Clock& clock);
  ~TrackingAllocator();
  TrackingAllocator(const TrackingAllocator&) = delete;
  TrackingAllocator& operator=(const TrackingAllocator&) = delete;

  Tensor allocate(DType dtype, std::int64_t numel, const AllocTag& tag, Space space = Space::Device);
  void free(Tensor& t);
  // Changes what an allocation is counted as (a free and an allocation at the same instant).
  void retag(const Tensor& t, Category category);

  void set_phase(Phase p) { phase_ = p; }
  Phase phase() const { return phase_; }
  void set_step(int step) { step_ = step; }
  void set_op_seq(std::uint64_t seq) { op_seq_ = seq; }
  int step() const { return step_; }
  // Debug mode: freed memory is filled with 0xFF and kept out of reuse until released.
  void set_poison(bool on) { poison_ = on; }
  bool poison() const { return poison_; }
  void release_quarantine();
  // Device bytes beyond which an allocation throws OutOfMemoryError (0: no limit).
  void set_device_limit(std::uint64_t bytes) { limit_ = bytes; }
  // Start a new peak window (e.g. one training step).
  void reset_peak();

  std::uint64_t live(Space s, Category c) const { return live_[idx(s)][static_cast<int>(c)]; }
  std::uint64_t live_total(Space s) const { return total_[idx(s)]; }
  std::uint64_t peak_device() const { return peak_; }          // over the current window
  std::size_t peak_event() const { return peak_event_; }      // index of the event that set it
  std::uint64_t peak_device_all() const { return peak_all_; }  // over the whole run
  std::uint64_t reserved_device() const { return device_.reserved_bytes(); }
  bool backs_memory() const { return device_.backs_memory(); }

  const std::vector<MemoryEvent>& events() const { return events_; }
  const std::vector<std::string>& names() const { return names_; }
  std::uint32_t intern(const std::string& name);
  Clock& clock() { return clock_; }

 private:
  struct Live {
    std::uint64_t bytes;
    Category category;
    Space space;
    std::int32_t block;
    std::uint32_t tensor;
    void* data;
  };
  static int idx(Space s) { return s == Space::Device ? 0 : 1; }
  MemoryResource& resource(Space s) { return s == Space::Device ? device_ : host_; }
  void record(std::int64_t delta, std::uint64_t id, const Live& l);

  MemoryResource& device_;
  MemoryResource& host_;
  Clock& clock_;
  Phase phase_ = Phase::Init;
  int step_ = -1;
  std::uint64_t op_seq_ = 0;
  bool poison_ = false;
  std::uint64_t limit_ = 0;
  std::uint64_t next_id_ = 1;
  std::array<std::array<std::uint64_t, kNumCategories>, 2> live_{};
  std::array<std::uint64_t, 2> total_{};
  std::uint64_t peak_ = 0, peak_all_ = 0;
  std::size_t peak_event_ = 0;
  std::unordered_map<std::uint64_t, Live> allocs_;
  std::vector<std::pair<void*, std::pair<std::size_t, Space>>> quarantine_;
  std::vector<MemoryEvent> events_;
 public:
  // Asynchronous backends move events onto the device's time axis after a step.
  std::vector<MemoryEvent>& mutable_events() { return events_; }
 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::uint32_t> name_ids_;
};

}  // namespace remat
