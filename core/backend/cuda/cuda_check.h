// Return-code checks for the CUDA runtime and cuBLAS: every call is checked, and a failure
// throws remat::Error naming the call, where it was made, and the library's message.
#pragma once
#include <string>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/util/error.h"

namespace remat::cuda {

[[noreturn]] void throw_cuda(cudaError_t e, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line);

}  // namespace remat::cuda

#define REMAT_CUDA(call)                                                        \
  do {                                                                          \
    cudaError_t remat_e_ = (call);                                              \
    if (remat_e_ != cudaSuccess) ::remat::cuda::throw_cuda(remat_e_, #call, __FILE__, __LINE__); \
  } while (0)

#define REMAT_CUBLAS(call)                                                      \
  do {                                                                          \
    cublasStatus_t remat_s_ = (call);                                           \
    if (remat_s_ != CUBLAS_STATUS_SUCCESS)                                      \
      ::remat::cuda::throw_cublas(remat_s_, #call, __FILE__, __LINE__);         \
  } while (0)
