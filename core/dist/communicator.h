// Collectives between the ranks of a run. One interface for every kind of parallelism: data
// parallelism (gradients summed before AdamW, ZeRO's shards), tensor, sequence and pipeline
// parallelism, each of which names its collectives and buffers through the same calls.
// Every call is tagged with what it moves (a name for the trace) and counted by kind and bytes.
// `GlooCommunicator` (gloo_communicator.h) moves host memory between processes,
// `NcclCommunicator` (nccl_communicator.h, loaded through nccl_loader.h) device memory; `NullCommunicator`
// moves nothing, for world size 1 and for the simulator, so a simulated rank allocates exactly
// what a running one does (buffers come from the tracking allocator in the caller, never here).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace remat {

enum class CommKind : std::uint8_t { AllReduce, ReduceScatter, AllGather, Broadcast, Barrier, Send, Recv };
const char* to_string(CommKind k);

// One collective as it was called: its kind, the bytes this rank handed in (for a reduce-scatter
// the whole buffer, for an all-gather the whole gathered result) and the ranks it spanned.
struct CommRecord {
  CommKind kind = CommKind::Barrier;
  std::string what;
  std::uint64_t bytes = 0;
  int ranks = 1;
  int peer = -1;  // Send and Recv: the other rank (in this communicator's numbering)
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // False for the null communicator: the buffers are left as they are.
  virtual bool moves_data() const = 0;
  // True when the buffers are device memory (NCCL on CUDA). Such a communicator runs every
  // collective even in a world of one, so each call is checked and waits for its stream alike.
  virtual bool device_memory() const { return false; }

  // data[0, n) summed over the ranks, in place on every rank.
  void all_reduce_sum(float* data, std::size_t n, const std::string& what);
  void all_reduce_sum(double* data, std::size_t n, const std::string& what);
  // data holds size() shards of `shard` elements; afterwards shard rank() (at data + rank() *
  // shard) is the sum over the ranks of that shard. The other shards are left undefined (Gloo's
  // communicator sums them too: it runs an all-reduce, twice the traffic of a reduce-scatter).
  void reduce_scatter_sum(float* data, std::size_t shard, const std::string& what);
  // data holds size() shards of `shard` elements, this rank's at data + rank() * shard;
  // afterwards every shard holds its owner's values on every rank.
  void all_gather(float* data, std::size_t shard, const std::string& what);
  // The same with a count per rank (some may be 0): data holds sum(counts) elements, rank r's
  // part the counts[r] after the parts of the ranks before it (ZeRO's shards of a bucket).
  // reduce_scatter_sum_v leaves this rank's part summed over the ranks (Gloo's communicator
  // sums the whole buffer: an all-reduce); all_gather_v leaves every part its owner's values.
  void reduce_scatter_sum_v(float* data, const std::vector<std::size_t>& counts, const std::string& what);
  void all_gather_v(float* data, const std::vector<std::size_t>& counts, const std::string& what);
  // The same two over 16-bit elements (bf16 moved as its bits: a gather sums nothing).
  void all_gather(std::uint16_t* data, std::size_t shard, const std::string& what);
  void all_gather_v(std::uint16_t* data, const std::vector<std::size_t>& counts, const std::string& what);
  // data[0, n) of rank `root` on every rank.
  void broadcast(float* data, std::size_t n, int root, const std::string& what);
  void barrier(const std::string& what);
  // Point to point (pipeline stages). send posts data[0, bytes) to rank `peer` and returns at
  // once; the buffer must stay as it is until a later recv or wait_sends() has returned. recv
  // posts the receive of the next message `peer` sends this rank (messages between two ranks
  // arrive in the order sent), then waits for every send this rank posted before (so their
  // buffers are free again when it returns), then for the message: `bytes` bytes into data.
  // A receive of several parts takes the next messages in order, every one posted before the
  // sends are waited for: a message and what travels with it (a pipeline stage's activation and
  // its routing statistics) received one by one could leave two ranks each waiting for the
  // other's second send.
  struct RecvPart {
    void* data = nullptr;
    std::size_t bytes = 0;
    std::string what;
  };
  void send(const void* data, std::size_t bytes, int peer, const std::string& what);
  void recv(void* data, std::size_t bytes, int peer, const std::string& what);
  void recv(const std::vector<RecvPart>& parts, int peer);
  // Waits until every send posted so far has left this rank (not recorded: it moves nothing):
  // called where a rank's next work does not start with a recv (a pipeline's first stage before
  // a forward, its last before a backward) and at the step's end. Gloo's sends leave by
  // themselves; NCCL's leave with this rank's next recv, in one group with it, or here
  // (nccl_communicator.h).
  void wait_sends();

  const std::vector<CommRecord>& records() const { return records_; }
  void clear_records() { records_.clear(); }
  // Drops the records from the n-th on: collectives that are no step's traffic (gathering the
  // ranks' weights for a file) leave the per-step counts as the steps made them.
  void drop_records_from(std::size_t n) {
    if (n < records_.size()) records_.resize(n);
  }
  std::uint64_t bytes_recorded() const;

 protected:
  enum class Elem : std::uint8_t { F32, F64 };
  virtual void do_all_reduce(void* data, std::size_t n, Elem e) = 0;
  virtual void do_reduce_scatter(float* data, std::size_t shard) = 0;
  virtual void do_all_gather(float* data, std::size_t shard) = 0;
  // Defaults: the reduce-scatter as an all-reduce of the whole buffer; the all-gather refused
  // (Error) where a communicator has none.
  virtual void do_reduce_scatter_v(float* data, const std::vector<std::size_t>& counts);
  virtual void do_all_gather_v(float* data, const std::vector<std::size_t>& counts);
  virtual void do_all_gather_v16(std::uint16_t* data, const std::vector<std::size_t>& counts);
  virtual void do_broadcast(float* data, std::size_t n, int root) = 0;
  virtual void do_barrier() = 0;
  // Defaults: refused (Error) where a communicator has no point-to-point transfers.
  virtual void do_send(const void* data, std::size_t bytes, int peer);
  virtual void do_recv(const std::vector<RecvPart>& parts, int peer);  // none empty
  virtual void do_wait_sends() {}

 private:
  void record(CommKind k, const std::string& what, std::uint64_t bytes, int peer = -1);
  std::vector<CommRecord> records_;
};

// World size `size`, this process rank `rank`: every collective is counted, nothing moves.
class NullCommunicator : public Communicator {
 public:
  explicit NullCommunicator(int rank = 0, int size = 1);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool moves_data() const override { return false; }

 protected:
  void do_all_reduce(void*, std::size_t, Elem) override {}
  void do_reduce_scatter(float*, std::size_t) override {}
  void do_all_gather(float*, std::size_t) override {}
  void do_reduce_scatter_v(float*, const std::vector<std::size_t>&) override {}
  void do_all_gather_v(float*, const std::vector<std::size_t>&) override {}
  void do_all_gather_v16(std::uint16_t*, const std::vector<std::size_t>&) override {}
  void do_broadcast(float*, std::size_t, int) override {}
  void do_barrier() override {}
  void do_send(const void*, std::size_t, int) override {}
  void do_recv(const std::vector<RecvPart>&, int) override {}

 private:
  int rank_, size_;
};

// Why `dir` cannot be the ranks' rendezvous store: "does not exist" or "is not a directory";
// "" for an existing directory. The one check of the launcher, Gloo's and NCCL's rendezvous.
std::string store_dir_problem(const std::string& dir);

}  // namespace remat
