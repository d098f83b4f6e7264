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

#include <vector>

#include "core/util/error.h"

namespace remat {

struct GlooCommunicator::Impl {
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sending;  // posted, not yet waited
};

namespace {

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
  guarded("the rendezvous", rank_, size_, [&] {
    gloo::transport::tcp::attr attr;
    attr.hostname = o.hostname;
    impl_->device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(o.store_dir);
    gloo::rendezvous::PrefixStore prefix(o.prefix, store);
    impl_->context = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    impl_->context->setTimeout(timeout_);
    impl_->context->connectFullMesh(prefix, impl_->device);
  });
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

void GlooCommunicator::do_recv(void* data, std::size_t bytes, int peer) {
  received_.resize(static_cast<std::size_t>(size_), 0);
  guarded("recv", rank_, size_, [&] {
    auto buf = impl_->context->createUnboundBuffer(data, bytes);
    buf->recv(peer, p2p_slot(peer, rank_, received_[static_cast<std::size_t>(peer)]++));
    // Posted first, then this rank's earlier sends finished: two stages that each wait for
    // the other to take their sends have both posted the receive the other waits for.
    for (auto& b : impl_->sending)
      if (!b->waitSend(timeout_))
        throw Error("a send was not taken within " + std::to_string(timeout_.count()) + " ms");
    impl_->sending.clear();
    if (!buf->waitRecv(timeout_))
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
