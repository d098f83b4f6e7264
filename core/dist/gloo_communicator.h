// Collectives between processes through Gloo (PyTorch's CPU backend): TCP on the loopback
// interface, ranks meeting through a FileStore directory every rank can reach. Every collective
// and the rendezvous itself give up after the timeout with an Error naming what waited, so a
// rank that died or hangs ends the others' runs instead of blocking them.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/dist/communicator.h"

namespace remat {

struct GlooOptions {
  int rank = 0, size = 1;
  std::string store_dir;      // FileStore directory, shared by all ranks
  std::string prefix = "rematlab";  // the group's keys in the store: groups over one store differ
  std::string hostname = "127.0.0.1";
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

class GlooCommunicator final : public Communicator {
 public:
  // Connects to every other rank (full mesh); throws Error after the timeout.
  explicit GlooCommunicator(const GlooOptions& o);
  ~GlooCommunicator() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool moves_data() const override { return true; }

 protected:
  void do_all_reduce(void* data, std::size_t n, Elem e) override;
  void do_reduce_scatter(float* data, std::size_t shard) override;
  void do_all_gather(float* data, std::size_t shard) override;
  void do_all_gather_v(float* data, const std::vector<std::size_t>& counts) override;
  void do_all_gather_v16(std::uint16_t* data, const std::vector<std::size_t>& counts) override;
  void do_broadcast(float* data, std::size_t n, int root) override;
  void do_barrier() override;
  void do_send(const void* data, std::size_t bytes, int peer) override;
  void do_recv(const std::vector<RecvPart>& parts, int peer) override;
  void do_wait_sends() override;

 private:
  template <typename T>
  void all_gather_v_of(T* data, const std::vector<std::size_t>& counts);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::uint32_t tag_ = 0;  // each collective its own tag, the same sequence on every rank
  std::vector<std::uint32_t> sent_, received_;  // per peer: messages so far (their slots)
};

}  // namespace remat
