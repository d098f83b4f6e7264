// The C entry points of librematcuda.so. The core dlopens the library only when a user asks
// for --device cuda (see core/backend/backend_factory.cpp), so programs start on machines
// without CUDA. Errors come back as text in the caller's buffer; nothing throws across.
#pragma once
#include <cstddef>

#include "core/backend/backend.h"
#include "core/memory/tracking_allocator.h"
#include "core/profiler/profiler.h"

extern "C" {

// Usable devices (compute capability 9.0 or newer); 0 with a reason in `why` when there is no
// driver, no device or no usable device. Never crashes without a driver.
int remat_cuda_device_count(char* why, std::size_t why_len);

// A CudaBackend on `device`, or nullptr with the reason in `err`. Owned by the caller.
remat::Backend* remat_cuda_backend_create(int device, char* err, std::size_t err_len);

// The CUPTI profiler for a backend from remat_cuda_backend_create, timing on `clock`; nullptr
// with the reason in `err`. Owned by the caller; destroy it before the backend.
remat::Profiler* remat_cuda_profiler_create(remat::Backend* backend, remat::Clock* clock,
                                            char* err, std::size_t err_len);
}
