// The CPU backend's thread pool: `size` lanes, lane 0 is the calling thread. Work is split by the
// callers into fixed partitions over independent outputs, so results never depend on scheduling.
//
// An op hands its lanes work every few microseconds on small models, so a lane that has just
// finished spins for a short while (kSpin) before it sleeps on the condition variable: the next
// op's hand-over then costs a cache line, not a futex wake-up of a sleeping thread (tens of
// microseconds on a virtual machine). The caller waits for the lanes the same way. The spin is
// bounded, so an idle pool sleeps and takes no CPU; REMAT_POOL_SPIN_US sets it (0: never spin).
// A pool of more lanes than the machine has cores never spins.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace remat::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int size);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  int size() const { return size_; }
  // Runs fn(ctx, lane) for lane in [0, lanes), lanes <= size(); returns when all are done.
  void run(int lanes, void (*fn)(void*, int), void* ctx);
  // How long a lane spins before it sleeps, in microseconds (0 when the pool oversubscribes).
  int spin_us() const { return spin_us_; }

 private:
  void worker(int lane);
  int size_;
  int spin_us_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  int lanes_ = 0;
  bool stop_ = false;
  void (*fn_)(void*, int) = nullptr;
  void* ctx_ = nullptr;
};

}  // namespace remat::cpu
