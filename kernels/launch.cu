#include "kernels/launch.cuh"

#include <string>

#include "core/util/error.h"

namespace remat::kernels {

void check_launch(const char* kernel) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw Error(std::string("CUDA kernel ") + kernel + " failed to launch: " +
                cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

void set_smem_limit(const void* kernel, int bytes, const char* name) {
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess)
    throw Error(std::string("cudaFuncSetAttribute(MaxDynamicSharedMemorySize=") +
                std::to_string(bytes) + ") for " + name + ": " + cudaGetErrorName(e) + ": " +
                cudaGetErrorString(e));
}

}  // namespace remat::kernels
