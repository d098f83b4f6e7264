// Collectives between CUDA ranks through NCCL, one GPU per rank. Built (librematnccl) only where
// the CUDA toolkit and NCCL are found; librematcore never links CUDA.
//
// Buffers are device memory (or managed memory) of the communicator's device; every collective
// is enqueued on the communicator's CUDA stream and the call returns once that stream has
// finished it, so the contract is Communicator's: in place and complete on return. Work the
// caller queued on another stream must be finished (or that stream passed in NcclOptions) before
// the call. A host pointer (a loss of the host) is copied through a device buffer of the
// communicator and back.
//
// NCCL's reduce-scatter is a real one: rank r receives only its shard summed, in place at
// data + r·shard, and each rank sends and receives (n - 1)/n of the buffer, half the traffic of
// an all-reduce (Gloo's path runs an all-reduce instead). The other shards are left as NCCL
// leaves them: undefined. A barrier is an all-reduce of one float in the communicator's buffer.
// With a count per rank (ZeRO's buckets), equal counts take ncclReduceScatter / ncclAllGather;
// unequal ones one NCCL group of an ncclReduce (or ncclBroadcast) per rank with a non-empty
// part, rooted at that rank, so each part travels once, as in a reduce-scatter (all-gather).
// 16-bit gathers move bytes (ncclUint8): bf16 bits arrive as they left.
//
// Point to point (pipeline stages): send() checks the buffer and keeps it; the transfer starts
// with this rank's next recv(), in one NCCL group with that receive (Megatron-LM's
// send_forward_recv_backward), or at wait_sends(), which returns once the sends are done. So no two NCCL operations of one process are ever in flight at once (NCCL's
// condition for using several communicators side by side), and two stages that send to each
// other at once cannot wait on each other: each one's send travels with its receive. A
// collective called while sends wait lets them go first. Send and receive buffers must be
// device memory of the communicator's device (no staging).
//
// Rendezvous: rank 0 draws NCCL's unique id and writes it to <store_dir>/<key> atomically (a
// temporary file renamed into place); the other ranks wait for that file. The directory must be
// fresh for each run (a file left by an earlier run would be read as this run's id), as Gloo's
// FileStore directory is. The communicator is non-blocking: the rendezvous, NCCL's set-up and
// every collective poll ncclCommGetAsyncError and give up after the timeout, aborting the
// communicator (ncclCommAbort) and throwing Error naming the collective and the rank. After an
// abort every call throws.
//
// World size 1 is a real NCCL communicator (one rank, its collectives are run by NCCL). NCCL
// cannot put two ranks of one communicator on one GPU, so more ranks need as many GPUs.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "core/dist/communicator.h"

namespace remat {

struct NcclOptions {
  int rank = 0, size = 1;
  std::string store_dir;               // rendezvous directory, shared by all ranks
  std::string key = "rematlab-nccl-id";  // file name of rank 0's unique id in store_dir
  int device = 0;                      // CUDA device of this rank
  cudaStream_t stream = nullptr;       // nullptr: the communicator creates its own stream
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

class NcclCommunicator final : public Communicator {
 public:
  // Meets the other ranks and sets NCCL up; throws Error after the timeout.
  explicit NcclCommunicator(const NcclOptions& o);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool moves_data() const override { return true; }
  bool device_memory() const override { return true; }
  cudaStream_t stream() const;
  int device() const { return device_; }

 protected:
  void do_all_reduce(void* data, std::size_t n, Elem e) override;
  void do_reduce_scatter(float* data, std::size_t shard) override;
  void do_all_gather(float* data, std::size_t shard) override;
  void do_reduce_scatter_v(float* data, const std::vector<std::size_t>& counts) override;
  void do_all_gather_v(float* data, const std::vector<std::size_t>& counts) override;
  void do_all_gather_v16(std::uint16_t* data, const std::vector<std::size_t>& counts) override;
  void do_broadcast(float* data, std::size_t n, int root) override;
  void do_barrier() override;
  void do_send(const void* data, std::size_t bytes, int peer) override;
  void do_recv(const std::vector<RecvPart>& parts, int peer) override;
  void do_wait_sends() override;

 private:
  // all_gather_v over elements of `elem` bytes, moved as bytes.
  void gather_parts(void* data, const std::vector<std::size_t>& counts, std::size_t elem);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_, size_, device_;
  std::chrono::milliseconds timeout_;
};

// The unique-id file exchange of the rendezvous, on its own so it can be checked without a GPU.
namespace nccl_rendezvous {

// Throws Error unless `dir` is an existing directory.
void check_dir(const std::string& dir, int rank, int size);
// Writes `bytes` to dir/key through a temporary file renamed into place (readers see all of it
// or nothing); Error naming the path on failure.
void publish(const std::string& dir, const std::string& key, const std::string& bytes, int rank,
             int size);
// Waits for dir/key to hold `n` bytes and returns them; Error naming the rank, the file and
// rank 0 after the timeout, or at once when the file exists with another size.
std::string wait_for(const std::string& dir, const std::string& key, std::size_t n, int rank,
                     int size, std::chrono::milliseconds timeout);

}  // namespace nccl_rendezvous

}  // namespace remat
