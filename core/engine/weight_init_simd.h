// The initial weights' values sixteen Philox blocks at a time with AVX-512 (weight_init_avx512.cpp),
// bit for bit those of normal_values' scalar loop; normal_values uses them where the CPU has
// AVX-512F and they are enabled.
#pragma once
#include <cstdint>

#include "core/util/philox.h"

namespace remat::weight_simd {

// Whether normal_values takes the AVX-512 path: the CPU has AVX-512F, and set_enabled(false)
// (tests, benchmarks) or REMAT_WEIGHT_INIT=scalar in the environment did not turn it off.
bool active();
void set_enabled(bool on);

// Only where the CPU has AVX-512F (cpu_has_avx512()):
bool cpu_has_avx512();
// The 64 values of Philox blocks group .. group + 15 of `key` (elements 4 group ..), as
// normal_values writes them.
void normal_blocks16(const DropoutKey& key, float stddev, std::uint64_t group, float* out);
// logf of 16 floats in [2^-32, 1] and sinf, cosf of 16 floats in [0, 120): glibc's bits (tests).
void log16(const float* in, float* out);
void sincos16(const float* in, float* sin_out, float* cos_out);

}  // namespace remat::weight_simd
