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
class HeapMemory final : public MemoryResource {
 public:
  void* allocate(std::size_t bytes) override;
  void deallocate(void* p, std::size_t bytes) override;
  void poison(void* p, std::size_t bytes) override;
  std::uint64_t reserved_bytes() const override { return reserved_; }

 private:
  std::uint64_t reserved_ = 0;
};

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
