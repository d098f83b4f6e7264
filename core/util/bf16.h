// bfloat16 storage: the upper 16 bits of an IEEE float, rounded to nearest even.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define REMAT_HD __host__ __device__ __forceinline__
#else
#define REMAT_HD inline
#endif

namespace remat {

using bf16_bits = std::uint16_t;

REMAT_HD float bf16_to_float(bf16_bits b) {
  std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

REMAT_HD bf16_bits float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_bits>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16_bits>(u >> 16);
}

// Round a float to the nearest bf16 value and return it as a float.
REMAT_HD float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

}  // namespace remat
