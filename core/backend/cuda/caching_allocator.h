// Caching allocators over cudaMalloc (device) and cudaHostAlloc (pinned host, for offloaded
// tensors). Requests are rounded up to a size class; a freed block goes back to the cache of its
// class and is reused for the next request of that class without returning to the driver.
// reserved_bytes() is the sum of what our cudaMalloc / cudaHostAlloc calls hold right now.
//
// Copies on the copy streams may still read or write a block after the executor frees it (an
// offload's source, a prefetch's destination). copy() records the copy's completion event on
// every block it touches (record_use); a freed block with pending events is parked and only
// reused once all its events have completed.
//
// Out of memory: the cache is released (after waiting for parked blocks) and the call retried
// once; then remat::OutOfMemoryError with the requested and free bytes (cudaMemGetInfo).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <cuda_runtime.h>

#include "core/memory/memory_resource.h"

namespace remat::cuda {

// A CUDA event shared by the blocks a copy touches; destroyed with its last owner.
using EventPtr = std::shared_ptr<CUevent_st>;
EventPtr make_event();  // cudaEventCreateWithFlags(cudaEventDisableTiming)

class CachingPool final : public MemoryResource {
 public:
  enum class Kind { Device, PinnedHost };
  // poison_stream: the stream device poisoning is ordered on (the compute stream).
  CachingPool(Kind kind, int device, cudaStream_t poison_stream);
  ~CachingPool() override;
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;

  void* allocate(std::size_t bytes) override;
  void deallocate(void* p, std::size_t bytes) override;
  void poison(void* p, std::size_t bytes) override;
  std::uint64_t reserved_bytes() const override;

  std::uint64_t allocated_bytes() const;  // in blocks handed out (size-class bytes)
  std::uint64_t cached_bytes() const;     // reserved but not handed out
  std::uint64_t malloc_calls() const;     // cudaMalloc / cudaHostAlloc calls so far
  std::uint64_t malloc_bytes_total() const;  // bytes those calls asked for, in total
  std::vector<std::size_t> segment_sizes() const;  // each block held from the driver
  std::size_t parked_blocks() const;       // freed, waiting for a copy to finish

  // An asynchronous operation that completes at `ev` uses the block containing p. Returns
  // false when p is not in one of our blocks (e.g. pageable memory).
  bool record_use(const void* p, const EventPtr& ev);
  // The not yet completed events recorded on the block containing p (none when p is not ours).
  std::vector<EventPtr> pending_uses(const void* p);
  bool owns(const void* p) const;
  // Gives every cached free block back to the driver (waits for parked blocks first).
  void release_cached();

  static std::size_t size_class(std::size_t bytes);
  Kind kind() const { return kind_; }

 private:
  struct Block {
    char* ptr = nullptr;
    std::size_t size = 0;
    bool in_use = false;
    bool parked = false;
    std::vector<EventPtr> pending;
  };
  void* raw_alloc(std::size_t bytes);  // nullptr on out-of-memory; throws on other errors
  void raw_free(void* p);
  bool pending_done(Block& b);  // queries and drops completed events
  void process_parked_locked();
  void release_cached_locked(bool wait_parked);
  Block* find_containing(const void* p) const;
  [[noreturn]] void throw_oom(std::size_t bytes, std::size_t cls);

  Kind kind_;
  int device_;
  cudaStream_t poison_stream_;
  mutable std::mutex mu_;
  std::map<std::uintptr_t, std::unique_ptr<Block>> blocks_;  // by start address
  std::unordered_map<std::size_t, std::vector<Block*>> free_;  // by size class, LIFO
  std::vector<Block*> parked_;
  std::uint64_t reserved_ = 0, allocated_ = 0, malloc_calls_ = 0, malloc_bytes_ = 0;
};

}  // namespace remat::cuda
