// 64-bit FNV-1a over raw bytes: the gradient checksum hashes the bits of every gradient.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace remat {

class Fnv1a64 {
 public:
  void update(const void* data, std::size_t bytes) {
    auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) {
      h_ ^= p[i];
      h_ *= 0x100000001b3ull;
    }
  }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 0xcbf29ce484222325ull;
};

std::string hex64(std::uint64_t v);

}  // namespace remat
