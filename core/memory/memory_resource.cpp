#include "core/memory/memory_resource.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string_view>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/util/error.h"

namespace remat {

namespace {

const char* g_heap_mode = "system";

void retain_freed_heap() {
  const char* e = std::getenv("REMAT_HOST_HEAP");
  if (e && std::string_view(e) == "system") return;
#if defined(__GLIBC__)
  // Both calls only change thresholds; a failed one leaves malloc's default.
  const bool trim = mallopt(M_TRIM_THRESHOLD, INT32_MAX) == 1;
  const bool mmaps = mallopt(M_MMAP_MAX, 0) == 1;
  if (trim && mmaps) g_heap_mode = "retained";
#endif
}

}  // namespace

const char* host_heap_mode() { return g_heap_mode; }

HeapMemory::HeapMemory() {
  static std::once_flag once;
  std::call_once(once, retain_freed_heap);
}

// 64-byte aligned blocks from plain malloc: the block is 64 bytes longer and the pointer malloc
// gave sits just below the aligned address. aligned_alloc asks malloc for more than a freed block
// of the same size holds, so with small allocations in between (the profiler's records) freed
// blocks were never reused and a long step's heap grew far past its live bytes.
void* HeapMemory::allocate(std::size_t bytes) {
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
  if (p) std::free(static_cast<void**>(p)[-1]);
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
