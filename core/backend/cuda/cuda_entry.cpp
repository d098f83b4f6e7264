#include "core/backend/cuda/cuda_entry.h"

#include <exception>
#include <string>

#include <cuda_runtime.h>

#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/cupti_profiler.h"
#include "core/util/error.h"


extern "C" int remat_cuda_device_count(char* why, std::size_t why_len) {
  remat::put_error(why, why_len, "");
  try {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      remat::put_error(why, why_len,
                       std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " +
                            cudaGetErrorString(e));
      cudaGetLastError();
      return 0;
    }
    if (n <= 0) {
      remat::put_error(why, why_len, "no CUDA device");
      return 0;
    }
    int usable = 0;
    std::string reasons;
    for (int d = 0; d < n; ++d) {
      cudaDeviceProp p{};
      e = cudaGetDeviceProperties(&p, d);
      if (e != cudaSuccess) {
        reasons += "device " + std::to_string(d) + ": cudaGetDeviceProperties: " +
                   cudaGetErrorString(e) + "; ";
        cudaGetLastError();
        continue;
      }
      if (p.major >= 9) {
        ++usable;
      } else {
        reasons += "device " + std::to_string(d) + " (" + p.name + ") has compute capability " +
                   std::to_string(p.major) + "." + std::to_string(p.minor) +
                   ", this build needs 9.0 or newer; ";
      }
    }
    if (usable == 0) remat::put_error(why, why_len, reasons.empty() ? "no usable CUDA device" : reasons);
    return usable;
  } catch (const std::exception& ex) {
    remat::put_error(why, why_len, ex.what());
    return 0;
  } catch (...) {
    remat::put_error(why, why_len, "unknown error while counting CUDA devices");
    return 0;
  }
}

extern "C" remat::Backend* remat_cuda_backend_create(int device, char* err, std::size_t err_len) {
  remat::put_error(err, err_len, "");
  try {
    return new remat::cuda::CudaBackend(device);
  } catch (const std::exception& ex) {
    remat::put_error(err, err_len, ex.what());
  } catch (...) {
    remat::put_error(err, err_len, "unknown error while starting the CUDA backend");
  }
  return nullptr;
}

extern "C" remat::Profiler* remat_cuda_profiler_create(remat::Backend* backend,
                                                       remat::Clock* clock, char* err,
                                                       std::size_t err_len) {
  remat::put_error(err, err_len, "");
  try {
    if (!clock) throw remat::Error("no clock");
    auto* cb = dynamic_cast<remat::cuda::CudaBackend*>(backend);
    if (!cb) throw remat::Error("the backend is not a CUDA backend");
    cudaError_t e = cudaSetDevice(cb->device());
    if (e != cudaSuccess)
      throw remat::Error(std::string("cudaSetDevice: ") + cudaGetErrorString(e));
    return new remat::cupti::CuptiProfiler(remat::cupti::make_real_cupti_api(), *clock);
  } catch (const std::exception& ex) {
    remat::put_error(err, err_len, ex.what());
  } catch (...) {
    remat::put_error(err, err_len, "unknown error while starting the CUPTI profiler");
  }
  return nullptr;
}
