#include "core/backend/cuda/cupti_buffers.h"

#include <chrono>
#include <cstdlib>

#include "core/util/error.h"

namespace remat::cupti {

namespace {
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

std::atomic<ActivityBuffers*> ActivityBuffers::instance_{nullptr};

ActivityBuffers::ActivityBuffers(std::size_t buffer_bytes)
    : buffer_bytes_((buffer_bytes + 7) / 8 * 8) {}

ActivityBuffers::~ActivityBuffers() {
  uninstall();
  for (std::uint8_t* p : all_) std::free(p);
}

void ActivityBuffers::install() {
  ActivityBuffers* expected = nullptr;
  if (!instance_.compare_exchange_strong(expected, this) && expected != this)
    throw Error("CUPTI: another profiler already owns the activity buffers");
}

void ActivityBuffers::uninstall() {
  ActivityBuffers* expected = this;
  instance_.compare_exchange_strong(expected, nullptr);
}

std::uint8_t* ActivityBuffers::get_buffer() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!free_.empty()) {
    std::uint8_t* p = free_.back();
    free_.pop_back();
    return p;
  }
  auto* p = static_cast<std::uint8_t*>(std::aligned_alloc(8, buffer_bytes_));
  if (p) all_.push_back(p);
  return p;
}

void ActivityBuffers::request(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  const std::int64_t t0 = now_ns();
  ActivityBuffers* self = instance_.load();
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;  // as many as fit
  if (!self) return;  // CUPTI then drops records (counted by cuptiActivityGetNumDroppedRecords)
  std::uint8_t* p = self->get_buffer();
  if (p) {
    *buffer = p;
    *size = self->buffer_bytes_;
  }
  self->requested_.fetch_add(1);
  self->callback_ns_.fetch_add(now_ns() - t0);
}

void ActivityBuffers::on_complete(std::uint8_t* buffer, std::size_t size, std::size_t valid,
                                  std::uint32_t stream_id) {
  std::lock_guard<std::mutex> lock(mu_);
  CompletedBuffer b;
  b.data = buffer;
  b.size = size;
  b.valid = valid;
  b.stream_id = stream_id;
  b.seq = next_seq_++;
  done_.push_back(b);
}

void ActivityBuffers::complete(CUcontext, std::uint32_t stream_id, std::uint8_t* buffer,
                               std::size_t size, std::size_t valid_size) {
  const std::int64_t t0 = now_ns();
  ActivityBuffers* self = instance_.load();
  if (!buffer) return;
  if (!self) return;  // no owner (after teardown): the buffer leaks rather than crash
  self->on_complete(buffer, size, valid_size, stream_id);
  self->completed_.fetch_add(1);
  self->callback_ns_.fetch_add(now_ns() - t0);
}

std::vector<CompletedBuffer> ActivityBuffers::take_completed() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CompletedBuffer> out;
  out.swap(done_);
  return out;
}

void ActivityBuffers::recycle(const CompletedBuffer& b) {
  if (!b.data) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (std::uint8_t* p : all_)
    if (p == b.data) {
      free_.push_back(b.data);
      return;
    }
}

}  // namespace remat::cupti
