// CUDA ranks' communicator, loaded on demand: NcclCommunicator lives in librematnccl.so (built
// where the CUDA toolkit has NCCL), which links NCCL and the CUDA runtime; librematcore opens it
// with dlopen only when a parallel run asks for --device cuda, so programs start on machines
// without either. Nothing throws across the library's C entry points: errors come back as text.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "core/dist/communicator.h"

extern "C" {
// What librematnccl's entry point takes (plain C, so both sides agree on the layout).
struct RematNcclSpec {
  int rank;
  int size;
  int device;             // CUDA device of this rank
  long long timeout_ms;   // rendezvous and every collective
  const char* store_dir;  // the rendezvous directory every rank reaches
  const char* key;        // rank 0's unique-id file in it (one per communicator)
};
}

namespace remat {

struct NcclSpec {
  int rank = 0, size = 1, device = 0;
  std::string store_dir, key;
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

// Whether librematnccl.so loads here (and with it NCCL); `why` says why not.
bool nccl_available(std::string* why = nullptr);
// NCCL's version as "2.28.9"; empty when the library does not load.
std::string nccl_version();
// A communicator of NCCL's over `spec` (NcclCommunicator: rendezvous, set-up, timeouts as its
// header says). Throws Error with the reason: the library missing, or NCCL's set-up failing.
std::unique_ptr<Communicator> make_nccl_communicator(const NcclSpec& spec);

}  // namespace remat
