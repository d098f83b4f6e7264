#include "core/backend/cuda/caching_allocator.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda_sizing.h"
#include "core/util/error.h"

namespace remat::cuda {

EventPtr make_event() {
  cudaEvent_t e = nullptr;
  REMAT_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return EventPtr(e, [](cudaEvent_t ev) { cudaEventDestroy(ev); });
}

CachingPool::CachingPool(Kind kind, int device, cudaStream_t poison_stream)
    : kind_(kind), device_(device), poison_stream_(poison_stream) {}

CachingPool::~CachingPool() {
  // The owner synchronized the device; give everything back, ignoring errors at teardown.
  for (auto& [addr, b] : blocks_) {
    if (kind_ == Kind::Device) cudaFree(b->ptr);
    else cudaFreeHost(b->ptr);
  }
  cudaGetLastError();
}

std::size_t CachingPool::size_class(std::size_t bytes) { return cuda_size_class(bytes); }

void* CachingPool::raw_alloc(std::size_t bytes) {
  void* p = nullptr;
  cudaError_t e;
  if (kind_ == Kind::Device) {
    REMAT_CUDA(cudaSetDevice(device_));
    e = cudaMalloc(&p, bytes);
  } else {
    e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
  }
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the (non-sticky) error
    return nullptr;
  }
  if (e != cudaSuccess)
    throw_cuda(e, kind_ == Kind::Device ? "cudaMalloc" : "cudaHostAlloc", __FILE__, __LINE__);
  ++malloc_calls_;
  malloc_bytes_ += bytes;
  return p;
}

void CachingPool::raw_free(void* p) {
  if (kind_ == Kind::Device) REMAT_CUDA(cudaFree(p));
  else REMAT_CUDA(cudaFreeHost(p));
}

bool CachingPool::pending_done(Block& b) {
  auto it = b.pending.begin();
  while (it != b.pending.end()) {
    cudaError_t e = cudaEventQuery(it->get());
    if (e == cudaSuccess) {
      it = b.pending.erase(it);
    } else if (e == cudaErrorNotReady) {
      cudaGetLastError();  // cudaErrorNotReady is not an error state, but keep it clean
      ++it;
    } else {
      throw_cuda(e, "cudaEventQuery", __FILE__, __LINE__);
    }
  }
  return b.pending.empty();
}

void CachingPool::process_parked_locked() {
  auto it = parked_.begin();
  while (it != parked_.end()) {
    Block* b = *it;
    if (pending_done(*b)) {
      b->parked = false;
      free_[b->size].push_back(b);
      it = parked_.erase(it);
    } else {
      ++it;
    }
  }
}

void CachingPool::release_cached_locked(bool wait_parked) {
  if (wait_parked) {
    for (Block* b : parked_) {
      for (auto& ev : b->pending) REMAT_CUDA(cudaEventSynchronize(ev.get()));
      b->pending.clear();
      b->parked = false;
      free_[b->size].push_back(b);
    }
    parked_.clear();
  }
  for (auto& [cls, list] : free_) {
    for (Block* b : list) {
      raw_free(b->ptr);
      reserved_ -= b->size;
      blocks_.erase(reinterpret_cast<std::uintptr_t>(b->ptr));
    }
    list.clear();
  }
  free_.clear();
}

void CachingPool::throw_oom(std::size_t bytes, std::size_t cls) {
  std::size_t free_b = 0, total_b = 0;
  std::string where;
  if (kind_ == Kind::Device) {
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
      cudaGetLastError();
      free_b = 0;
    }
    where = "device " + std::to_string(device_);
  } else {
    where = "pinned host memory";
  }
  throw OutOfMemoryError("CUDA out of memory on " + where + ": cannot allocate " +
                             std::to_string(bytes) + " bytes (size class " + std::to_string(cls) +
                             "); " + std::to_string(free_b) + " bytes free of " +
                             std::to_string(total_b) + ", " + std::to_string(reserved_) +
                             " reserved by this process, " + std::to_string(allocated_) +
                             " in use",
                         bytes, free_b);
}

void* CachingPool::allocate(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::size_t cls = size_class(bytes);
  process_parked_locked();
  auto it = free_.find(cls);
  if (it != free_.end() && !it->second.empty()) {
    Block* b = it->second.back();
    it->second.pop_back();
    b->in_use = true;
    allocated_ += b->size;
    return b->ptr;
  }
  void* p = raw_alloc(cls);
  if (!p) {
    release_cached_locked(true);
    p = raw_alloc(cls);
    if (!p) throw_oom(bytes, cls);
  }
  auto b = std::make_unique<Block>();
  b->ptr = static_cast<char*>(p);
  b->size = cls;
  b->in_use = true;
  reserved_ += cls;
  allocated_ += cls;
  blocks_.emplace(reinterpret_cast<std::uintptr_t>(p), std::move(b));
  return p;
}

void CachingPool::deallocate(void* p, std::size_t bytes) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == blocks_.end() || !it->second->in_use)
    throw Error("CUDA caching allocator: deallocate of a pointer it did not hand out (" +
                std::to_string(bytes) + " bytes)");
  Block* b = it->second.get();
  b->in_use = false;
  allocated_ -= b->size;
  if (!b->pending.empty() && !pending_done(*b)) {
    b->parked = true;
    parked_.push_back(b);
  } else {
    free_[b->size].push_back(b);
  }
}

CachingPool::Block* CachingPool::find_containing(const void* p) const {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  auto it = blocks_.upper_bound(addr);
  if (it == blocks_.begin()) return nullptr;
  --it;
  Block* b = it->second.get();
  if (addr >= it->first && addr < it->first + b->size) return b;
  return nullptr;
}

bool CachingPool::owns(const void* p) const {
  std::lock_guard<std::mutex> lock(mu_);
  return find_containing(p) != nullptr;
}

bool CachingPool::record_use(const void* p, const EventPtr& ev) {
  std::lock_guard<std::mutex> lock(mu_);
  Block* b = find_containing(p);
  if (!b) return false;
  if (b->pending.size() >= 8) pending_done(*b);  // keep the list short on long-lived blocks
  b->pending.push_back(ev);
  return true;
}

std::vector<EventPtr> CachingPool::pending_uses(const void* p) {
  std::lock_guard<std::mutex> lock(mu_);
  Block* b = find_containing(p);
  if (!b) return {};
  pending_done(*b);
  return b->pending;
}

void CachingPool::poison(void* p, std::size_t bytes) {
  if (!p || bytes == 0) return;
  std::vector<EventPtr> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Block* b = find_containing(p)) pending = b->pending;
  }
  if (kind_ == Kind::Device) {
    for (auto& ev : pending) REMAT_CUDA(cudaStreamWaitEvent(poison_stream_, ev.get(), 0));
    REMAT_CUDA(cudaMemsetAsync(p, 0xFF, bytes, poison_stream_));
  } else {
    for (auto& ev : pending) REMAT_CUDA(cudaEventSynchronize(ev.get()));
    std::memset(p, 0xFF, bytes);
  }
}

std::uint64_t CachingPool::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}

std::uint64_t CachingPool::allocated_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocated_;
}

std::uint64_t CachingPool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_ - allocated_;
}

std::uint64_t CachingPool::malloc_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return malloc_calls_;
}

std::uint64_t CachingPool::malloc_bytes_total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return malloc_bytes_;
}

std::vector<std::size_t> CachingPool::segment_sizes() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::size_t> v;
  v.reserve(blocks_.size());
  for (const auto& [addr, b] : blocks_) v.push_back(b->size);
  return v;
}

std::size_t CachingPool::parked_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return parked_.size();
}

void CachingPool::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached_locked(true);
}

}  // namespace remat::cuda
