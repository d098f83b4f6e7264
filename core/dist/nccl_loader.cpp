#include "core/dist/nccl_loader.h"

#include <dlfcn.h>

#include "core/util/error.h"
#include "core/util/paths.h"

namespace remat {

namespace {

struct NcclLib {
  std::string error;
  int (*version)() = nullptr;
  Communicator* (*create)(const RematNcclSpec*, char*, std::size_t) = nullptr;
};

// Loaded once and kept for the life of the process (its communicators may outlive a caller).
NcclLib& nccl_lib() {
  static NcclLib lib = [] {
    NcclLib l;
    std::string errs;
    void* handle = open_own_library("librematnccl.so", errs);
    if (!handle) {
      l.error = errs.empty() ? "this build has no NCCL communicator (librematnccl.so not found: "
                               "the CUDA toolkit it was built with had no NCCL)"
                             : "the NCCL communicator library cannot be loaded: " + errs;
      return l;
    }
    l.version = reinterpret_cast<int (*)()>(dlsym(handle, "remat_nccl_version"));
    l.create = reinterpret_cast<Communicator* (*)(const RematNcclSpec*, char*, std::size_t)>(
        dlsym(handle, "remat_nccl_communicator_create"));
    if (!l.version || !l.create) l.error = "librematnccl.so lacks its entry points";
    return l;
  }();
  return lib;
}

}  // namespace

bool nccl_available(std::string* why) {
  const NcclLib& l = nccl_lib();
  if (why) *why = l.error;
  return l.error.empty();
}

std::string nccl_version() {
  const NcclLib& l = nccl_lib();
  if (!l.error.empty()) return "";
  const int v = l.version();  // NCCL_VERSION_CODE: major·10000 + minor·100 + patch (2.9 on)
  if (v <= 0) return "";
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::unique_ptr<Communicator> make_nccl_communicator(const NcclSpec& s) {
  const NcclLib& l = nccl_lib();
  if (!l.error.empty()) throw Error("CUDA ranks need NCCL: " + l.error);
  const RematNcclSpec c{s.rank, s.size, s.device, static_cast<long long>(s.timeout.count()), s.store_dir.c_str(),
                        s.key.c_str()};
  char err[1024] = {0};
  Communicator* comm = l.create(&c, err, sizeof err);
  if (!comm) throw Error(err[0] ? err : "the NCCL communicator failed to start");
  return std::unique_ptr<Communicator>(comm);
}

}  // namespace remat
