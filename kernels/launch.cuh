// Shared declarations of the CUDA kernel launchers: the storage type of float tensors and the
// launch check. Every launcher in kernels/ takes sizes, raw pointers and a stream, launches, and
// calls check_launch, which throws remat::Error naming the kernel when the launch failed.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace remat::kernels {

// Storage of a float tensor: fp32 or bf16 (arithmetic is always fp32).
enum class FType : int { F32 = 0, BF16 = 1 };

// Throws remat::Error("<kernel>: <cuda error>") when the last launch failed.
void check_launch(const char* kernel);

// True when p is aligned to `bytes` (a power of two).
inline bool aligned_to(const void* p, std::uintptr_t bytes) {
  return (reinterpret_cast<std::uintptr_t>(p) & (bytes - 1)) == 0;
}

// Sets the dynamic shared memory limit of a kernel (once per kernel and size); throws with the
// kernel name on failure.
void set_smem_limit(const void* kernel, int bytes, const char* name);

}  // namespace remat::kernels
