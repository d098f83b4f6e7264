#include "core/backend/cuda/cuda_check.h"

#include <cstring>

namespace remat::cuda {

namespace {
const char* base_name(const char* file) {
  const char* s = std::strrchr(file, '/');
  return s ? s + 1 : file;
}
}  // namespace

void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
  throw Error(std::string("CUDA error in ") + call + " (" + base_name(file) + ":" +
              std::to_string(line) + "): " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  throw Error(std::string("cuBLAS error in ") + call + " (" + base_name(file) + ":" +
              std::to_string(line) + "): " + cublasGetStatusName(s) + ": " +
              cublasGetStatusString(s));
}

}  // namespace remat::cuda
