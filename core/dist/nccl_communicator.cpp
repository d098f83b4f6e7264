#include "core/dist/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>

#include "core/util/error.h"

namespace remat {

namespace {

using Clock = std::chrono::steady_clock;

std::string rank_of(int rank, int size) {
  return "rank " + std::to_string(rank) + " of " + std::to_string(size);
}

std::string seconds(std::chrono::milliseconds t) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g s", static_cast<double>(t.count()) / 1000.0);
  return b;
}

// Polls fast at first (a collective of a few KiB takes microseconds), then every 50 µs.
void pause(int spin) {
  if (spin < 2000)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

// Makes `device` current for the calls of one collective and restores the caller's device.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) {
      cudaGetLastError();
      prev_ = -1;
    }
    if (prev_ != device) cudaSetDevice(device);
  }
  ~DeviceScope() {
    int now = -1;
    if (prev_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != prev_) cudaSetDevice(prev_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int prev_ = -1;
};

// Calls `each(note)` between ncclGroupStart and ncclGroupEnd, `note` taking each NCCL call's
// result; the group is always closed. Returns the first failure, else ncclGroupEnd's result
// (ncclInProgress on a non-blocking communicator: settle() waits).
template <class F>
ncclResult_t grouped(F&& each) {
  const ncclResult_t start = ncclGroupStart();
  if (start != ncclSuccess) return start;
  ncclResult_t first = ncclSuccess;
  each([&](ncclResult_t r) {
    if (first == ncclSuccess && r != ncclSuccess && r != ncclInProgress) first = r;
  });
  const ncclResult_t end = ncclGroupEnd();
  return first != ncclSuccess ? first : end;
}

bool all_equal(const std::vector<std::size_t>& counts) {
  for (std::size_t c : counts)
    if (c != counts.front()) return false;
  return true;
}

}  // namespace

namespace nccl_rendezvous {

void check_dir(const std::string& dir, int rank, int size) {
  const std::string who = "the NCCL rendezvous of " + rank_of(rank, size);
  if (dir.empty()) throw Error(who + " needs a store directory");
  if (const std::string why = store_dir_problem(dir); !why.empty())
    throw Error(who + ": the store directory '" + dir + "' " + why);
}

void publish(const std::string& dir, const std::string& key, const std::string& bytes, int rank,
             int size) {
  const std::string path = (std::filesystem::path(dir) / key).string();
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const auto fail = [&](const std::string& file) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error("the NCCL rendezvous of " + rank_of(rank, size) + " could not write '" + file +
                "': " + why);
  };
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(tmp);
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (std::fclose(f) != 0 || !written) fail(tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(path);
}

std::string wait_for(const std::string& dir, const std::string& key, std::size_t n, int rank,
                     int size, std::chrono::milliseconds timeout) {
  const std::string path = (std::filesystem::path(dir) / key).string();
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
      std::string got(n + 1, '\0');
      const std::size_t r = std::fread(got.data(), 1, got.size(), f);
      std::fclose(f);
      if (r != n)
        throw Error("the NCCL rendezvous of " + rank_of(rank, size) + ": '" + path + "' holds " +
                    std::to_string(r) + (r > n ? " or more" : "") + " bytes, not the " +
                    std::to_string(n) + " of an NCCL unique id (a file of another run?)");
      got.resize(n);
      return got;
    }
    if (Clock::now() >= deadline)
      throw Error("the NCCL rendezvous of " + rank_of(rank, size) + " timed out after " +
                  seconds(timeout) + " waiting for '" + path + "' (rank 0 writes it)");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace nccl_rendezvous

struct NcclCommunicator::Impl {
  int rank = 0, size = 1, device = 0;
  std::chrono::milliseconds timeout{0};
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  bool own_stream = false;
  bool aborted = false;
  cudaEvent_t done = nullptr;
  void* scratch = nullptr;  // host buffers staged here; the barrier's float
  std::size_t scratch_bytes = 0;
  struct Send {
    const void* data;
    std::size_t bytes;
    int peer;
  };
  std::vector<Send> pending;  // posted, not yet handed to NCCL

  std::string who(const char* what) const { return std::string(what) + " on " + rank_of(rank, size); }

  void abort() {
    if (comm) ncclCommAbort(comm);
    comm = nullptr;
    aborted = true;
  }

  [[noreturn]] void fail(const char* what, const std::string& why) {
    const bool had = comm != nullptr;
    abort();
    throw Error(who(what) + " failed: " + why + (had ? " (the NCCL communicator was aborted)" : ""));
  }

  void cuda(cudaError_t e, const char* what, const char* call) {
    if (e == cudaSuccess) return;
    cudaGetLastError();
    fail(what, std::string(call) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  }

  void nccl(ncclResult_t r, const char* what, const char* call) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    std::string why = std::string(call) + ": " + ncclGetErrorString(r);
    if (comm) {
      const char* last = ncclGetLastError(comm);
      if (last && *last) why += ": " + std::string(last);
    }
    fail(what, why);
  }

  void alive(const char* what) const {
    if (aborted || !comm)
      throw Error(who(what) + ": the NCCL communicator was aborted by an earlier failure");
  }

  // Until NCCL has taken the last call (a non-blocking communicator answers ncclInProgress
  // first) or reports an error; then, with `event`, until the stream has run it.
  void settle(const char* what, Clock::time_point deadline, bool event) {
    bool queued = false;
    for (int spin = 0;; ++spin) {
      ncclResult_t state = ncclSuccess;
      nccl(ncclCommGetAsyncError(comm, &state), what, "ncclCommGetAsyncError");
      nccl(state, what, "NCCL");
      if (state == ncclSuccess) {
        if (!event) return;
        if (!queued) {
          cuda(cudaEventRecord(done, stream), what, "cudaEventRecord");
          queued = true;
        }
        const cudaError_t q = cudaEventQuery(done);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) cuda(q, what, "cudaEventQuery");
      }
      if (Clock::now() >= deadline) {
        abort();
        throw Error(who(what) + " timed out after " + seconds(timeout) +
                    " (another rank died, hangs or did not call it); the NCCL communicator was "
                    "aborted");
      }
      pause(spin);
    }
  }

  void* staging(std::size_t bytes, const char* what) {
    if (bytes > scratch_bytes) {
      if (scratch) cuda(cudaFree(scratch), what, "cudaFree");
      scratch = nullptr;
      scratch_bytes = 0;
      cuda(cudaMalloc(&scratch, bytes), what, "cudaMalloc");
      scratch_bytes = bytes;
    }
    return scratch;
  }

  // The device address of the caller's buffer: itself for device or managed memory of this
  // device, else a device copy in the scratch buffer.
  void* on_device(void* data, std::size_t bytes, const char* what) {
    cudaPointerAttributes a{};
    const cudaError_t e = cudaPointerGetAttributes(&a, data);
    if (e != cudaSuccess) cudaGetLastError();
    if (e == cudaSuccess && (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged)) {
      if (a.type == cudaMemoryTypeDevice && a.device != device)
        throw Error(who(what) + ": the buffer is on CUDA device " + std::to_string(a.device) +
                    ", the communicator on device " + std::to_string(device));
      return data;
    }
    void* dev = staging(bytes, what);
    cuda(cudaMemcpyAsync(dev, data, bytes, cudaMemcpyHostToDevice, stream), what,
         "cudaMemcpyAsync");
    return dev;
  }

  // Throws unless `p` is device (or managed) memory of this communicator's device.
  void require_device(const void* p, const std::string& what) const {
    cudaPointerAttributes a{};
    const cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) cudaGetLastError();
    if (e != cudaSuccess || (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged))
      throw Error(who(what.c_str()) + ": point-to-point transfers take device memory, not a host buffer");
    if (a.type == cudaMemoryTypeDevice && a.device != device)
      throw Error(who(what.c_str()) + ": the buffer is on CUDA device " + std::to_string(a.device) +
                  ", the communicator on device " + std::to_string(device));
  }

  // The pending sends, and with `from` >= 0 the receives of `parts` from that rank in order, as
  // one NCCL group; returns once the stream has run all of it.
  void exchange(const std::string& what, const std::vector<Communicator::RecvPart>& parts, int from) {
    alive(what.c_str());
    DeviceScope scope(device);
    const auto deadline = Clock::now() + timeout;
    std::vector<Send> sends;
    sends.swap(pending);
    if (sends.empty() && from < 0) return;
    nccl(grouped([&](const auto& note) {
           for (const Send& x : sends) note(ncclSend(x.data, x.bytes, ncclUint8, x.peer, comm, stream));
           if (from >= 0)
             for (const Communicator::RecvPart& p : parts)
               note(ncclRecv(p.data, p.bytes, ncclUint8, from, comm, stream));
         }),
         what.c_str(), from >= 0 ? "ncclRecv" : "ncclSend");
    settle(what.c_str(), deadline, true);
  }

  // One collective on `bytes` of the caller's buffer `data`: `call(device_address)` enqueues
  // it; returns when the stream has run it (and copied a staged buffer back). Sends still
  // waiting go first, so every rank meets its peers' sends and collectives in the same order.
  template <class F>
  void run(const char* what, void* data, std::size_t bytes, F&& call) {
    alive(what);
    if (!pending.empty()) exchange(std::string(what) + " (the sends before it)", {}, -1);
    DeviceScope scope(device);
    const auto deadline = Clock::now() + timeout;
    void* dev = on_device(data, bytes, what);
    nccl(call(dev), what, "the NCCL call");
    settle(what, deadline, dev == data);
    if (dev != data) {
      cuda(cudaMemcpyAsync(data, dev, bytes, cudaMemcpyDeviceToHost, stream), what,
           "cudaMemcpyAsync");
      settle(what, deadline, true);
    }
  }
};

NcclCommunicator::NcclCommunicator(const NcclOptions& o)
    : impl_(std::make_unique<Impl>()), rank_(o.rank), size_(o.size), device_(o.device),
      timeout_(o.timeout) {
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    throw Error("rank " + std::to_string(o.rank) + " of a world of " + std::to_string(o.size));
  Impl& m = *impl_;
  m.rank = rank_;
  m.size = size_;
  m.device = device_;
  m.timeout = timeout_;
  nccl_rendezvous::check_dir(o.store_dir, rank_, size_);
  if (o.key.empty() || o.key.find('/') != std::string::npos)
    throw Error("the NCCL rendezvous of " + rank_of(rank_, size_) + ": bad key '" + o.key + "'");
  const auto deadline = Clock::now() + timeout_;

  ncclUniqueId id{};
  if (rank_ == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
      throw Error("the NCCL rendezvous of " + rank_of(rank_, size_) +
                  " failed: ncclGetUniqueId: " + ncclGetErrorString(r));
    nccl_rendezvous::publish(o.store_dir, o.key, std::string(id.internal, sizeof id.internal),
                             rank_, size_);
  } else {
    const std::string got = nccl_rendezvous::wait_for(o.store_dir, o.key, sizeof id.internal,
                                                      rank_, size_, timeout_);
    std::memcpy(id.internal, got.data(), sizeof id.internal);
  }

  const char* what = "the NCCL set-up";
  try {
    DeviceScope scope(device_);
    m.cuda(cudaSetDevice(device_), what, "cudaSetDevice");
    if (o.stream) {
      m.stream = o.stream;
    } else {
      m.cuda(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking), what,
             "cudaStreamCreateWithFlags");
      m.own_stream = true;
    }
    m.cuda(cudaEventCreateWithFlags(&m.done, cudaEventDisableTiming), what,
           "cudaEventCreateWithFlags");
    m.staging(sizeof(float), what);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    m.nccl(ncclCommInitRankConfig(&m.comm, size_, id, rank_, &config), what,
           "ncclCommInitRankConfig");
    if (!m.comm) m.fail(what, "ncclCommInitRankConfig gave no communicator");
    m.settle(what, deadline, false);
  } catch (...) {
    if (m.done) cudaEventDestroy(m.done);
    if (m.scratch) cudaFree(m.scratch);
    if (m.own_stream && m.stream) cudaStreamDestroy(m.stream);
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  Impl& m = *impl_;
  DeviceScope scope(device_);
  if (m.comm) {
    // Finalize flushes what is queued; a peer that is gone makes it wait, so it gets the
    // timeout too, then the communicator is aborted instead of destroyed.
    const ncclResult_t f = ncclCommFinalize(m.comm);
    bool clean = f == ncclSuccess || f == ncclInProgress;
    const auto deadline = Clock::now() + m.timeout;
    for (int spin = 0; clean; ++spin) {
      ncclResult_t state = ncclSuccess;
      if (ncclCommGetAsyncError(m.comm, &state) != ncclSuccess) state = ncclInternalError;
      if (state == ncclSuccess) break;
      if (state != ncclInProgress || Clock::now() >= deadline) clean = false;
      pause(spin);
    }
    if (clean)
      ncclCommDestroy(m.comm);
    else
      ncclCommAbort(m.comm);
    m.comm = nullptr;
  }
  if (m.done) cudaEventDestroy(m.done);
  if (m.scratch) cudaFree(m.scratch);
  if (m.own_stream && m.stream) cudaStreamDestroy(m.stream);
}

cudaStream_t NcclCommunicator::stream() const { return impl_->stream; }

void NcclCommunicator::do_all_reduce(void* data, std::size_t n, Elem e) {
  const ncclDataType_t type = e == Elem::F32 ? ncclFloat32 : ncclFloat64;
  const std::size_t bytes = n * (e == Elem::F32 ? sizeof(float) : sizeof(double));
  Impl& m = *impl_;
  m.run("all_reduce", data, bytes, [&](void* p) {
    return ncclAllReduce(p, p, n, type, ncclSum, m.comm, m.stream);
  });
}

void NcclCommunicator::do_reduce_scatter(float* data, std::size_t shard) {
  // In place as NCCL defines it: the receive buffer is this rank's shard of the send buffer.
  Impl& m = *impl_;
  const std::size_t mine = static_cast<std::size_t>(rank_) * shard;
  m.run("reduce_scatter", data, shard * static_cast<std::size_t>(size_) * sizeof(float),
        [&](void* p) {
          float* all = static_cast<float*>(p);
          return ncclReduceScatter(all, all + mine, shard, ncclFloat32, ncclSum, m.comm, m.stream);
        });
}

void NcclCommunicator::do_all_gather(float* data, std::size_t shard) {
  // In place as NCCL defines it: the send buffer is this rank's shard of the receive buffer.
  Impl& m = *impl_;
  const std::size_t mine = static_cast<std::size_t>(rank_) * shard;
  m.run("all_gather", data, shard * static_cast<std::size_t>(size_) * sizeof(float),
        [&](void* p) {
          float* all = static_cast<float*>(p);
          return ncclAllGather(all + mine, all, shard, ncclFloat32, m.comm, m.stream);
        });
}

void NcclCommunicator::do_broadcast(float* data, std::size_t n, int root) {
  Impl& m = *impl_;
  m.run("broadcast", data, n * sizeof(float), [&](void* p) {
    return ncclBroadcast(p, p, n, ncclFloat32, root, m.comm, m.stream);
  });
}

void NcclCommunicator::do_reduce_scatter_v(float* data, const std::vector<std::size_t>& counts) {
  Impl& m = *impl_;
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  m.run("reduce_scatter", data, total * sizeof(float), [&](void* p) {
    float* all = static_cast<float*>(p);
    if (all_equal(counts)) {
      const std::size_t c = counts.front();
      return ncclReduceScatter(all, all + static_cast<std::size_t>(rank_) * c, c, ncclFloat32, ncclSum, m.comm,
                               m.stream);
    }
    // Rank r's part summed into rank r's place (ncclReduce's receive buffer counts on the root only).
    return grouped([&](const auto& note) {
      std::size_t off = 0;
      for (int r = 0; r < size_; ++r) {
        const std::size_t c = counts[static_cast<std::size_t>(r)];
        if (c) note(ncclReduce(all + off, all + off, c, ncclFloat32, ncclSum, r, m.comm, m.stream));
        off += c;
      }
    });
  });
}

void NcclCommunicator::gather_parts(void* data, const std::vector<std::size_t>& counts, std::size_t elem) {
  Impl& m = *impl_;
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  m.run("all_gather", data, total * elem, [&](void* p) {
    char* all = static_cast<char*>(p);
    if (all_equal(counts)) {
      const std::size_t c = counts.front() * elem;
      return ncclAllGather(all + static_cast<std::size_t>(rank_) * c, all, c, ncclUint8, m.comm, m.stream);
    }
    return grouped([&](const auto& note) {
      std::size_t off = 0;
      for (int r = 0; r < size_; ++r) {
        const std::size_t c = counts[static_cast<std::size_t>(r)] * elem;
        if (c) note(ncclBroadcast(all + off, all + off, c, ncclUint8, r, m.comm, m.stream));
        off += c;
      }
    });
  });
}

void NcclCommunicator::do_all_gather_v(float* data, const std::vector<std::size_t>& counts) {
  gather_parts(data, counts, sizeof(float));
}

void NcclCommunicator::do_all_gather_v16(std::uint16_t* data, const std::vector<std::size_t>& counts) {
  gather_parts(data, counts, sizeof(std::uint16_t));
}

void NcclCommunicator::do_send(const void* data, std::size_t bytes, int peer) {
  Impl& m = *impl_;
  const std::string what = "send to rank " + std::to_string(peer);
  m.alive(what.c_str());
  {
    DeviceScope scope(device_);
    m.require_device(data, what);
  }
  m.pending.push_back({data, bytes, peer});
}

void NcclCommunicator::do_recv(const std::vector<RecvPart>& parts, int peer) {
  Impl& m = *impl_;
  const std::string what = "recv from rank " + std::to_string(peer);
  m.alive(what.c_str());
  {
    DeviceScope scope(device_);
    for (const RecvPart& p : parts) m.require_device(p.data, what);
  }
  m.exchange(what, parts, peer);
}

void NcclCommunicator::do_wait_sends() { impl_->exchange("the sends", {}, -1); }

void NcclCommunicator::do_barrier() {
  Impl& m = *impl_;
  m.run("barrier", m.scratch, sizeof(float), [&](void* p) {
    return ncclAllReduce(p, p, 1, ncclFloat32, ncclSum, m.comm, m.stream);
  });
}

}  // namespace remat
