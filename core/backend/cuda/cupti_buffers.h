// The activity-buffer layer: hands CUPTI empty buffers when it asks (request callback) and
// queues the buffers it returns full (complete callback), in whatever order they complete.
// CUPTI's callbacks carry no user pointer, so one ActivityBuffers is installed process-wide at a
// time; the static trampolines route to it. Buffers are 8-byte aligned and recycled.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include <cupti_activity.h>

namespace remat::cupti {

struct CompletedBuffer {
  std::uint8_t* data = nullptr;
  std::size_t size = 0;        // capacity
  std::size_t valid = 0;       // bytes of records
  std::uint32_t stream_id = 0;
  std::uint64_t seq = 0;       // completion order
};

class ActivityBuffers {
 public:
  explicit ActivityBuffers(std::size_t buffer_bytes = std::size_t{4} << 20);
  ~ActivityBuffers();
  ActivityBuffers(const ActivityBuffers&) = delete;
  ActivityBuffers& operator=(const ActivityBuffers&) = delete;

  // Becomes the target of the static callbacks; throws when another one is installed.
  void install();
  void uninstall();

  static void request(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records);
  static void complete(CUcontext ctx, std::uint32_t stream_id, std::uint8_t* buffer,
                       std::size_t size, std::size_t valid_size);

  // Buffers completed so far (the caller owns them until recycle()).
  std::vector<CompletedBuffer> take_completed();
  void recycle(const CompletedBuffer& b);

  std::int64_t callback_ns() const { return callback_ns_.load(); }
  std::uint64_t requested() const { return requested_.load(); }
  std::uint64_t completed() const { return completed_.load(); }
  std::size_t buffer_bytes() const { return buffer_bytes_; }

 private:
  std::uint8_t* get_buffer();
  void on_complete(std::uint8_t* buffer, std::size_t size, std::size_t valid,
                   std::uint32_t stream_id);

  static std::atomic<ActivityBuffers*> instance_;
  std::size_t buffer_bytes_;
  std::mutex mu_;
  std::vector<std::uint8_t*> free_;
  std::vector<CompletedBuffer> done_;
  std::vector<std::uint8_t*> all_;
  std::uint64_t next_seq_ = 0;
  std::atomic<std::int64_t> callback_ns_{0};
  std::atomic<std::uint64_t> requested_{0}, completed_{0};
};

}  // namespace remat::cupti
