#include "core/dist/gloo_communicator.h"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/util/error.h"

namespace remat {

struct GlooCommunicator::Impl {
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sending;  // posted, not yet waited
};

namespace {

// Gloo's FileStore with the communicator's timeout on every wait (FileStore::get waits its own
// 30 s otherwise, whatever --dist-timeout says), a clear refusal of a key another job left in the
// directory (Gloo's own says "File already exists"), and the keys this rank wrote, so that it
// removes them once every rank of the group has read them. It also notes the keys it read that
// were written before it was made: when connecting to the address one holds fails, that key may
// be another job's (left by a job killed in its rendezvous), which the message then says.
class RendezvousStore final : public gloo::rendezvous::FileStore {
 public:
  RendezvousStore(const std::string& dir, std::chrono::milliseconds timeout, int rank, int size)
      : FileStore(dir), dir_(dir), timeout_(timeout), rank_(rank), size_(size),
        made_(std::filesystem::file_time_type::clock::now()) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    if (check({key}))
      throw Error("the rendezvous directory '" + dir_ + "' already holds the key '" + key + "' that rank " +
                  std::to_string(rank_) + " of " + std::to_string(size_) +
                  " writes: it is another job's (one that ended without removing its keys, or one running with "
                  "the same REMAT_DIST_STORE); give each job an empty directory of its own");
    FileStore::set(key, data);
    written_.push_back(objectPath(key));
  }
  std::vector<char> get(const std::string& key) override {
    wait({key}, timeout_);
    std::error_code ec;
    const auto at = std::filesystem::last_write_time(objectPath(key), ec);
    std::vector<char> v = FileStore::get(key);
    // Older than the timeout when this rank began: the rank that wrote it has given up waiting
    // for the others by now (a live peer's key is younger).
    if (!ec && at + timeout_ < made_)
      older_.push_back({key, std::chrono::duration<double>(made_ - at).count()});
    return v;
  }
  // For a failed connection: the keys read that were older than the timeout when this rank's
  // rendezvous began, or "".
  std::string older_keys_note() const {
    std::string s;
    for (const auto& [key, seconds] : older_) {
      char age[32];
      std::snprintf(age, sizeof age, "%.1f", seconds);
      s += (s.empty() ? "" : "; ") + std::string("the key '") + key + "' it read was written " + age +
           " s before this rank's rendezvous began";
    }
    if (s.empty()) return s;
    return s + ", longer ago than --dist-timeout: no rank of this job waits on it; it is another job's (one "
               "killed in its rendezvous, or one running with the same REMAT_DIST_STORE); give each job an empty "
               "directory of its own";
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    try {
      FileStore::wait(keys, std::min(timeout, timeout_));
    } catch (const std::exception& e) {
      // Many ranks on few cores start slowly: the same timeout, another cause.
      const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
      const std::string crowded =
          static_cast<unsigned>(size_) > cores
              ? "; or, if the " + std::to_string(size_) + " ranks share this machine's " + std::to_string(cores) +
                    " cores, they had not all started yet: give a longer --dist-timeout, or fewer ranks"
              : "";
      throw Error("no rank of the group wrote " + describe(keys) + " into the rendezvous directory '" + dir_ +
                  "' within " + std::to_string(timeout_.count()) + " ms (--dist-timeout): a rank did not start, "
                  "or waits in another directory" + crowded);
    }
  }
  // Removes the keys this rank wrote (every rank of the group has read them).
  void remove_own_keys() {
    for (const auto& path : written_) ::unlink(path.c_str());
    written_.clear();
  }

 private:
  static std::string describe(const std::vector<std::string>& keys) {
    std::string s;
    for (const auto& k : keys) s += (s.empty() ? "'" : ", '") + k + "'";
    return s.empty() ? "its key" : s;
  }
  std::string dir_;
  std::chrono::milliseconds timeout_;
  int rank_, size_;
  std::filesystem::file_time_type made_;
  std::vector<std::string> written_;  // the files of the keys this rank set
  std::vector<std::pair<std::string, double>> older_;  // keys read, seconds older than made_
};

// Gloo reports a peer that went away or a timeout as gloo::IoException or EnforceNotMet (both
// std::exception); say which collective of which rank it was.
template <class F>
void guarded(const char* what, int rank, int size, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    throw Error(std::string(what) + " on rank " + std::to_string(rank) + " of " +
                std::to_string(size) + " failed: " + e.what());
  }
}

}  // namespace

GlooCommunicator::GlooCommunicator(const GlooOptions& o)
    : impl_(std::make_unique<Impl>()), rank_(o.rank), size_(o.size), timeout_(o.timeout) {
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    throw Error("rank " + std::to_string(o.rank) + " of a world of " + std::to_string(o.size));
  if (o.store_dir.empty()) throw Error("the ranks' rendezvous needs a store directory");
  if (const std::string why = store_dir_problem(o.store_dir); !why.empty())
    throw Error("the rendezvous of rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                ": the store directory '" + o.store_dir + "' " + why);
  std::unique_ptr<RendezvousStore> store;
  guarded("the rendezvous", rank_, size_, [&] {
    store = std::make_unique<RendezvousStore>(o.store_dir, timeout_, rank_, size_);
  });
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = o.hostname;
    impl_->device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::PrefixStore prefix(o.prefix, *store);
    impl_->context = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    impl_->context->setTimeout(timeout_);
    impl_->context->connectFullMesh(prefix, impl_->device);
  } catch (const Error& e) {  // the store's own (a timeout, a key of another job): it says why
    store->remove_own_keys();
    throw Error("the rendezvous on rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                " failed: " + e.what());
  } catch (const std::exception& e) {
    store->remove_own_keys();  // a failed rendezvous leaves the directory as it found it
    const std::string older = store->older_keys_note();
    throw Error("the rendezvous on rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                " failed: " + e.what() + (older.empty() ? "" : " (" + older + ")"));
  }
  // Every rank of the group has read every key once all have connected: the keys go, so the
  // directory is empty again for the next job.
  do_barrier();
  store->remove_own_keys();
}

GlooCommunicator::~GlooCommunicator() = default;

namespace {

// The slot of message `n` from rank `from` to rank `to`: both ends compute the same, apart from
// the slots Gloo's collectives take (Slot::build puts small prefixes in the top byte).
std::uint64_t p2p_slot(int from, int to, std::uint32_t n) {
  return (std::uint64_t{0xE7} << 56) | (static_cast<std::uint64_t>(from & 0xFFF) << 44) |
         (static_cast<std::uint64_t>(to & 0xFFF) << 32) | n;
}

}  // namespace

void GlooCommunicator::do_send(const void* data, std::size_t bytes, int peer) {
  sent_.resize(static_cast<std::size_t>(size_), 0);
  guarded("send", rank_, size_, [&] {
    auto buf = impl_->context->createUnboundBuffer(const_cast<void*>(data), bytes);
    buf->send(peer, p2p_slot(rank_, peer, sent_[static_cast<std::size_t>(peer)]++));
    impl_->sending.push_back(std::move(buf));
  });
}

void GlooCommunicator::do_recv(const std::vector<RecvPart>& parts, int peer) {
  received_.resize(static_cast<std::size_t>(size_), 0);
  guarded("recv", rank_, size_, [&] {
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> bufs;
    for (const RecvPart& p : parts) {
      bufs.push_back(impl_->context->createUnboundBuffer(p.data, p.bytes));
      bufs.back()->recv(peer, p2p_slot(peer, rank_, received_[static_cast<std::size_t>(peer)]++));
    }
    // Posted first, then this rank's earlier sends finished: two stages that each wait for
    // the other to take their sends have both posted the receives the other waits for.
    for (auto& b : impl_->sending)
      if (!b->waitSend(timeout_))
        throw Error("a send was not taken within " + std::to_string(timeout_.count()) + " ms");
    impl_->sending.clear();
    for (auto& b : bufs)
      if (!b->waitRecv(timeout_))
        throw Error("no message from rank " + std::to_string(peer) + " within " +
                    std::to_string(timeout_.count()) + " ms");
  });
}

void GlooCommunicator::do_wait_sends() {
  guarded("send", rank_, size_, [&] {
    for (auto& b : impl_->sending)
      if (!b->waitSend(timeout_))
        throw Error("a send was not taken within " + std::to_string(timeout_.count()) + " ms");
    impl_->sending.clear();
  });
}

void GlooCommunicator::do_all_reduce(void* data, std::size_t n, Elem e) {
  guarded("all_reduce", rank_, size_, [&] {
    gloo::AllreduceOptions opts(impl_->context);
    if (e == Elem::F32) {
      opts.setOutput(static_cast<float*>(data), n);
      opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(
          &gloo::sum<float>));
    } else {
      opts.setOutput(static_cast<double*>(data), n);
      opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(
          &gloo::sum<double>));
    }
    opts.setTag(tag_++);
    opts.setTimeout(timeout_);
    gloo::allreduce(opts);
  });
}

void GlooCommunicator::do_reduce_scatter(float* data, std::size_t shard) {
  // Through Gloo's all-reduce, which leaves every shard summed (the contract asks for this
  // rank's only): Gloo's halving-doubling reduce-scatter does not leave rank r its shard at
  // r·shard, which ZeRO's flat-buffer layout needs.
  do_all_reduce(data, shard * static_cast<std::size_t>(size_), Elem::F32);
}

void GlooCommunicator::do_all_gather(float* data, std::size_t shard) {
  guarded("all_gather", rank_, size_, [&] {
    // Gloo's all-gather takes a separate input; our shard is copied out of the output first.
    std::vector<float> mine(data + static_cast<std::size_t>(rank_) * shard,
                            data + static_cast<std::size_t>(rank_ + 1) * shard);
    gloo::AllgatherOptions opts(impl_->context);
    opts.setInput(mine.data(), shard);
    opts.setOutput(data, shard * static_cast<std::size_t>(size_));
    opts.setTag(tag_++);
    opts.setTimeout(timeout_);
    gloo::allgather(opts);
  });
}

template <typename T>
void GlooCommunicator::all_gather_v_of(T* data, const std::vector<std::size_t>& counts) {
  guarded("all_gather_v", rank_, size_, [&] {
    std::size_t first = 0;
    for (int r = 0; r < rank_; ++r) first += counts[static_cast<std::size_t>(r)];
    const std::size_t n = counts[static_cast<std::size_t>(rank_)];
    // Gloo's all-gather takes a separate input; this rank's part is copied out of the output.
    std::vector<T> mine(data + first, data + first + n);
    mine.reserve(1);  // a rank that owns none of the bucket still hands Gloo a buffer
    gloo::AllgathervOptions opts(impl_->context);
    opts.setInput(mine.data(), n);
    opts.setOutput(data, counts);
    opts.setTag(tag_++);
    opts.setTimeout(timeout_);
    gloo::allgatherv(opts);
  });
}

void GlooCommunicator::do_all_gather_v(float* data, const std::vector<std::size_t>& counts) {
  all_gather_v_of(data, counts);
}

void GlooCommunicator::do_all_gather_v16(std::uint16_t* data, const std::vector<std::size_t>& counts) {
  all_gather_v_of(data, counts);
}

void GlooCommunicator::do_broadcast(float* data, std::size_t n, int root) {
  guarded("broadcast", rank_, size_, [&] {
    gloo::BroadcastOptions opts(impl_->context);
    opts.setOutput(data, n);
    opts.setRoot(root);
    opts.setTag(tag_++);
    opts.setTimeout(timeout_);
    gloo::broadcast(opts);
  });
}

void GlooCommunicator::do_barrier() {
  guarded("barrier", rank_, size_, [&] {
    gloo::BarrierOptions opts(impl_->context);
    opts.setTag(tag_++);
    opts.setTimeout(timeout_);
    gloo::barrier(opts);
  });
}

}  // namespace remat
