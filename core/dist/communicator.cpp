#include "core/dist/communicator.h"

#include <filesystem>

#include "core/util/error.h"

namespace remat {

const char* to_string(CommKind k) {
  switch (k) {
    case CommKind::AllReduce: return "all_reduce";
    case CommKind::ReduceScatter: return "reduce_scatter";
    case CommKind::AllGather: return "all_gather";
    case CommKind::Broadcast: return "broadcast";
    case CommKind::Barrier: return "barrier";
    case CommKind::Send: return "send";
    case CommKind::Recv: return "recv";
  }
  return "?";
}

void Communicator::record(CommKind k, const std::string& what, std::uint64_t bytes, int peer) {
  records_.push_back({k, what, bytes, peer < 0 ? size() : 2, peer});
}

std::uint64_t Communicator::bytes_recorded() const {
  std::uint64_t n = 0;
  for (const auto& r : records_) n += r.bytes;
  return n;
}

void Communicator::all_reduce_sum(float* data, std::size_t n, const std::string& what) {
  record(CommKind::AllReduce, what, n * sizeof(float));
  if ((size() > 1 || device_memory()) && n) do_all_reduce(data, n, Elem::F32);
}

void Communicator::all_reduce_sum(double* data, std::size_t n, const std::string& what) {
  record(CommKind::AllReduce, what, n * sizeof(double));
  if ((size() > 1 || device_memory()) && n) do_all_reduce(data, n, Elem::F64);
}

void Communicator::reduce_scatter_sum(float* data, std::size_t shard, const std::string& what) {
  record(CommKind::ReduceScatter, what, shard * static_cast<std::size_t>(size()) * sizeof(float));
  if ((size() > 1 || device_memory()) && shard) do_reduce_scatter(data, shard);
}

void Communicator::all_gather(float* data, std::size_t shard, const std::string& what) {
  record(CommKind::AllGather, what, shard * static_cast<std::size_t>(size()) * sizeof(float));
  if ((size() > 1 || device_memory()) && shard) do_all_gather(data, shard);
}

namespace {

std::size_t total_of(const std::vector<std::size_t>& counts, int size) {
  if (counts.size() != static_cast<std::size_t>(size))
    throw Error("a collective over " + std::to_string(size) + " ranks got " +
                std::to_string(counts.size()) + " counts");
  std::size_t n = 0;
  for (std::size_t c : counts) n += c;
  return n;
}

}  // namespace

void Communicator::reduce_scatter_sum_v(float* data, const std::vector<std::size_t>& counts,
                                        const std::string& what) {
  const std::size_t n = total_of(counts, size());
  record(CommKind::ReduceScatter, what, n * sizeof(float));
  if ((size() > 1 || device_memory()) && n) do_reduce_scatter_v(data, counts);
}

void Communicator::all_gather_v(float* data, const std::vector<std::size_t>& counts,
                                const std::string& what) {
  const std::size_t n = total_of(counts, size());
  record(CommKind::AllGather, what, n * sizeof(float));
  if ((size() > 1 || device_memory()) && n) do_all_gather_v(data, counts);
}

void Communicator::all_gather(std::uint16_t* data, std::size_t shard, const std::string& what) {
  all_gather_v(data, std::vector<std::size_t>(static_cast<std::size_t>(size()), shard), what);
}

void Communicator::all_gather_v(std::uint16_t* data, const std::vector<std::size_t>& counts,
                                const std::string& what) {
  const std::size_t n = total_of(counts, size());
  record(CommKind::AllGather, what, n * sizeof(std::uint16_t));
  if ((size() > 1 || device_memory()) && n) do_all_gather_v16(data, counts);
}

void Communicator::do_all_gather_v16(std::uint16_t*, const std::vector<std::size_t>&) {
  throw Error("this communicator has no all-gather of 16-bit elements");
}

void Communicator::do_reduce_scatter_v(float* data, const std::vector<std::size_t>& counts) {
  do_all_reduce(data, total_of(counts, size()), Elem::F32);
}

void Communicator::do_all_gather_v(float*, const std::vector<std::size_t>&) {
  throw Error("this communicator has no all-gather of variable counts");
}

void Communicator::broadcast(float* data, std::size_t n, int root, const std::string& what) {
  if (root < 0 || root >= size())
    throw Error("broadcast from rank " + std::to_string(root) + " of " + std::to_string(size()));
  record(CommKind::Broadcast, what, n * sizeof(float));
  if ((size() > 1 || device_memory()) && n) do_broadcast(data, n, root);
}

void Communicator::barrier(const std::string& what) {
  record(CommKind::Barrier, what, 0);
  if (size() > 1 || device_memory()) do_barrier();
}

namespace {

void check_peer(int peer, int rank, int size, const char* what) {
  if (peer < 0 || peer >= size || peer == rank)
    throw Error(std::string(what) + " between rank " + std::to_string(rank) + " and rank " +
                std::to_string(peer) + " of " + std::to_string(size));
}

}  // namespace

void Communicator::send(const void* data, std::size_t bytes, int peer, const std::string& what) {
  check_peer(peer, rank(), size(), "send");
  record(CommKind::Send, what, bytes, peer);
  if (bytes) do_send(data, bytes, peer);
}

void Communicator::recv(void* data, std::size_t bytes, int peer, const std::string& what) {
  recv({RecvPart{data, bytes, what}}, peer);
}

void Communicator::recv(const std::vector<RecvPart>& parts, int peer) {
  check_peer(peer, rank(), size(), "recv");
  std::vector<RecvPart> moving;
  for (const RecvPart& p : parts) {
    record(CommKind::Recv, p.what, p.bytes, peer);
    if (p.bytes) moving.push_back(p);
  }
  if (!moving.empty()) do_recv(moving, peer);
}

void Communicator::wait_sends() { do_wait_sends(); }

void Communicator::do_send(const void*, std::size_t, int) {
  throw Error("this communicator has no point-to-point transfers");
}

void Communicator::do_recv(const std::vector<RecvPart>&, int) {
  throw Error("this communicator has no point-to-point transfers");
}

NullCommunicator::NullCommunicator(int rank, int size) : rank_(rank), size_(size) {
  if (size < 1 || rank < 0 || rank >= size)
    throw Error("rank " + std::to_string(rank) + " of a world of " + std::to_string(size));
}

std::string store_dir_problem(const std::string& dir) {
  std::error_code ec;
  const auto st = std::filesystem::status(dir, ec);
  if (!std::filesystem::exists(st)) return "does not exist";
  if (!std::filesystem::is_directory(st)) return "is not a directory";
  return "";
}

}  // namespace remat
