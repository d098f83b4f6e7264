// The Highway targets the SIMD kernel files (cpu_simd_kernels.cpp, cpu_simd_activations.cpp)
// compile for: included before hwy/foreach_target.h, so that every file makes the same sets.
#pragma once
// Vectors of a sizeless type (SVE, RVV) cannot fill the partial-sum arrays of cpu_simd_inl.h.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif
