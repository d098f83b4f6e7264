// Makes the backend and profiler a user asked for. The CUDA backend lives in its own library
// (librematcuda.so), loaded only when asked for, so the program starts on machines without a
// GPU driver or CUDA runtime.
#pragma once
#include <memory>
#include <string>

#include "core/backend/backend.h"
#include "core/memory/tracking_allocator.h"
#include "core/profiler/profiler.h"

namespace remat {

struct Device {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Profiler> profiler;
};

// device: "cpu" or "cuda" (or "cuda:N"). threads: CPU BLAS threads (0 = 2).
// profile: attach the profiler (CUPTI on CUDA; host timing on the CPU).
// Throws Error with one line saying why a device is not available.
Device make_device(const std::string& device, int threads, Clock& clock, bool profile = true);

// Whether a CUDA device can be used here; `why` says why not.
bool cuda_available(std::string* why = nullptr);
// Usable CUDA devices here (0 with the reason in `why`: no CUDA backend, driver or device).
int cuda_device_count(std::string* why = nullptr);

}  // namespace remat
