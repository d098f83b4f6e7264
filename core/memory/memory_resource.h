// Raw memory from a backend: host heap, pinned host pool, CUDA caching allocator, or none.
#pragma once
#include <cstddef>
#include <cstdint>

namespace remat {

class MemoryResource {
 public:
  virtual ~MemoryResource() = default;
  // Throws OutOfMemoryError when the memory is not there.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* p, std::size_t bytes) = 0;
  // Fill with a pattern that reads as NaN in fp32 and bf16 (0xFF bytes).
  virtual void poison(void* p, std::size_t bytes) = 0;
  // Bytes held from the system (caching allocators hold more than is allocated).
  virtual std::uint64_t reserved_bytes() const = 0;
  // False for the simulator: pointers are placeholders and nothing may be read or written.
  virtual bool backs_memory() const { return true; }
};

// Aligned heap memory. Used by the CPU backend for both spaces.
//
// The first HeapMemory of a process tells glibc's malloc to keep what is freed (no trimming of
// the heap's top, no blocks of their own mapping): a step frees and allocates the same sizes every
// step, and memory handed back to the system is faulted in again on its next use, a cost of the
// allocator (20-30% of a small model's CPU step, growing with the memory a policy keeps) that no
// op has. The process's memory then stays at its high-water mark. REMAT_HOST_HEAP=system leaves
// malloc's defaults. `host_heap_mode()` says which is in force ("retained" or "system").
class HeapMemory final : public MemoryResource {
 public:
  HeapMemory();
  void* allocate(std::size_t bytes) override;
  void deallocate(void* p, std::size_t bytes) override;
  void poison(void* p, std::size_t bytes) override;
  std::uint64_t reserved_bytes() const override { return reserved_; }

 private:
  std::uint64_t reserved_ = 0;
};

const char* host_heap_mode();

// No memory at all: hands out distinct placeholder addresses. Used by the simulator.
class VirtualMemory final : public MemoryResource {
 public:
  void* allocate(std::size_t bytes) override;
  void deallocate(void*, std::size_t bytes) override { reserved_ -= bytes; }
  void poison(void*, std::size_t) override {}
  std::uint64_t reserved_bytes() const override { return reserved_; }
  bool backs_memory() const override { return false; }

 private:
  std::uintptr_t next_ = 4096;
  std::uint64_t reserved_ = 0;
};

}  // namespace remat
