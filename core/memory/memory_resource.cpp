#include "core/memory/memory_resource.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sys/mman.h>
#include <unistd.h>

#include "core/util/error.h"

namespace remat {

namespace {

std::size_t page_rounded(std::size_t bytes) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

// 64-byte aligned blocks from plain malloc: the block is 64 bytes longer and the pointer malloc
// gave sits just below the aligned address. aligned_alloc asks malloc for more than a freed block
// of the same size holds, so with small allocations in between (the profiler's records) freed
// blocks were never reused and a long step's heap grew far past its live bytes.
void* HeapMemory::allocate(std::size_t bytes) {
  if (allocates_zeroed(bytes)) {  // page aligned, zero-filled by the kernel on first touch
    void* p = bytes <= SIZE_MAX / 2 ? ::mmap(nullptr, page_rounded(bytes), PROT_READ | PROT_WRITE,
                                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                                    : MAP_FAILED;
    if (p == MAP_FAILED)
      throw OutOfMemoryError("host allocation of " + std::to_string(bytes) + " bytes failed", bytes, 0);
    reserved_ += bytes;
    return p;
  }
  std::size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* raw = rounded <= SIZE_MAX - 64 ? std::malloc(rounded + 64) : nullptr;
  if (!raw)
    throw OutOfMemoryError("host allocation of " + std::to_string(bytes) + " bytes failed", bytes,
                           0);
  auto base = reinterpret_cast<std::uintptr_t>(raw);
  auto aligned = (base + 64) & ~std::uintptr_t{63};  // at least 8 bytes above base: malloc aligns to 16
  reinterpret_cast<void**>(aligned)[-1] = raw;
  reserved_ += bytes;
  return reinterpret_cast<void*>(aligned);
}

void HeapMemory::deallocate(void* p, std::size_t bytes) {
  if (p && allocates_zeroed(bytes)) ::munmap(p, page_rounded(bytes));
  else if (p) std::free(static_cast<void**>(p)[-1]);
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
