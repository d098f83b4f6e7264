// The C entry points of librematnccl.so, opened by core/dist/nccl_loader.cpp.
#include <nccl.h>

#include <chrono>
#include <exception>
#include <string>

#include "core/dist/nccl_communicator.h"
#include "core/dist/nccl_loader.h"
#include "core/util/error.h"


extern "C" int remat_nccl_version() {
  int v = 0;
  return ncclGetVersion(&v) == ncclSuccess ? v : 0;
}

extern "C" remat::Communicator* remat_nccl_communicator_create(const RematNcclSpec* spec, char* err,
                                                               std::size_t err_len) {
  remat::put_error(err, err_len, "");
  try {
    if (!spec || !spec->store_dir || !spec->key) throw remat::Error("no NCCL communicator spec");
    remat::NcclOptions o;
    o.rank = spec->rank;
    o.size = spec->size;
    o.device = spec->device;
    o.store_dir = spec->store_dir;
    o.key = spec->key;
    o.timeout = std::chrono::milliseconds(spec->timeout_ms);
    return new remat::NcclCommunicator(o);
  } catch (const std::exception& e) {
    remat::put_error(err, err_len, e.what());
  } catch (...) {
    remat::put_error(err, err_len, "unknown error while setting NCCL up");
  }
  return nullptr;
}
