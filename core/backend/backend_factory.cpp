#include "core/backend/backend_factory.h"

#include <dlfcn.h>

#include "core/backend/cpu/cpu_backend.h"
#include "core/profiler/host_profiler.h"
#include "core/util/error.h"
#include "core/util/paths.h"

namespace remat {

namespace {

struct CudaLib {
  void* handle = nullptr;
  std::string error;
  int (*device_count)(char*, std::size_t) = nullptr;
  Backend* (*create)(int, char*, std::size_t) = nullptr;
  Profiler* (*profiler)(Backend*, Clock*, char*, std::size_t) = nullptr;
};

// Loaded once and kept for the life of the process (its objects may outlive any caller).
CudaLib& cuda_lib() {
  static CudaLib lib = [] {
    CudaLib l;
    std::string errs;
    l.handle = open_own_library("librematcuda.so", errs);
    if (!l.handle) {
      l.error = errs.empty() ? "this build has no CUDA backend (librematcuda.so not found)"
                             : "the CUDA backend library cannot be loaded: " + errs;
      return l;
    }
    l.device_count = reinterpret_cast<int (*)(char*, std::size_t)>(dlsym(l.handle, "remat_cuda_device_count"));
    l.create = reinterpret_cast<Backend* (*)(int, char*, std::size_t)>(dlsym(l.handle, "remat_cuda_backend_create"));
    l.profiler = reinterpret_cast<Profiler* (*)(Backend*, Clock*, char*, std::size_t)>(
        dlsym(l.handle, "remat_cuda_profiler_create"));
    if (!l.device_count || !l.create) l.error = "librematcuda.so lacks its entry points";
    return l;
  }();
  return lib;
}

}  // namespace

int cuda_device_count(std::string* why) {
  CudaLib& l = cuda_lib();
  if (!l.error.empty()) {
    if (why) *why = l.error;
    return 0;
  }
  char buf[512] = {0};
  const int n = l.device_count(buf, sizeof buf);
  if (n <= 0 && why) *why = buf[0] ? buf : "no CUDA device";
  return n > 0 ? n : 0;
}

bool cuda_available(std::string* why) { return cuda_device_count(why) > 0; }

Device make_device(const std::string& device, int threads, Clock& clock, bool profile) {
  Device d;
  if (device == "cpu") {
    d.backend = std::make_unique<CpuBackend>(threads);
    if (profile) d.profiler = std::make_unique<HostProfiler>(clock);
    return d;
  }
  if (device == "cuda" || device.rfind("cuda:", 0) == 0) {
    int index = 0;
    if (device.size() > 5) {
      try {
        index = std::stoi(device.substr(5));
      } catch (...) {
        throw Error("bad device '" + device + "' (cpu | cuda | cuda:N)");
      }
    }
    std::string why;
    if (!cuda_available(&why)) throw Error("--device cuda: no usable CUDA device: " + why);
    CudaLib& l = cuda_lib();
    char err[1024] = {0};
    Backend* b = l.create(index, err, sizeof err);
    if (!b) throw Error(std::string("--device cuda: ") + (err[0] ? err : "the CUDA backend failed to start"));
    d.backend.reset(b);
    if (profile && l.profiler) {
      Profiler* p = l.profiler(b, &clock, err, sizeof err);
      if (!p) throw Error(std::string("--device cuda: CUPTI profiler: ") + err);
      d.profiler.reset(p);
    } else if (profile) {
      d.profiler = std::make_unique<HostProfiler>(clock);
    }
    return d;
  }
  throw Error("unknown device '" + device + "' (cpu | cuda)");
}

}  // namespace remat
