// A view of tracked memory: pointer, element type, element count, and the allocation id.
#pragma once
#include <cstdint>

#include "core/memory/categories.h"
#include "core/model/model_config.h"

namespace remat {

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  std::int64_t numel = 0;
  std::uint64_t id = 0;  // allocation id in the tracking allocator; 0 for a sub-view
  Space space = Space::Device;

  explicit operator bool() const { return numel > 0 || data != nullptr; }
  std::uint64_t bytes() const { return static_cast<std::uint64_t>(numel) * dtype_size(dtype); }
  template <class T>
  T* as() const { return static_cast<T*>(data); }
  // Elements [offset, offset + n) as a view (no ownership).
  Tensor slice(std::int64_t offset, std::int64_t n) const {
    Tensor t = *this;
    t.data = static_cast<char*>(data) + offset * static_cast<std::int64_t>(dtype_size(dtype));
    t.numel = n;
    t.id = 0;
    return t;
  }
};

}  // namespace remat
