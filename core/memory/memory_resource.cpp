#include "core/memory/memory_resource.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/util/error.h"

namespace remat {

void* HeapMemory::allocate(std::size_t bytes) {
  std::size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p)
    throw OutOfMemoryError("host allocation of " + std::to_string(bytes) + " bytes failed", bytes,
                           0);
  reserved_ += bytes;
  return p;
}

void HeapMemory::deallocate(void* p, std::size_t bytes) {
  std::free(p);
  reserved_ -= bytes;
}

void HeapMemory::poison(void* p, std::size_t bytes) { std::memset(p, 0xFF, bytes); }

void* VirtualMemory::allocate(std::size_t bytes) {
  void* p = reinterpret_cast<void*>(next_);
  next_ += (bytes + 255) / 256 * 256 + 256;
  reserved_ += bytes;
  return p;
}

}  // namespace remat
