#include "core/backend/cpu/cpu_thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace remat::cpu {

namespace {

constexpr int kSpinUsDefault = 100;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() holds or `us` microseconds have passed; returns done().
template <class F>
bool spin_until(int us, F&& done) {
  if (us <= 0) return done();
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= until) return done();
  }
}

int spin_us_from_env() {
  const char* e = std::getenv("REMAT_POOL_SPIN_US");
  if (!e || !*e) return kSpinUsDefault;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  if (*end != '\0' || v < 0) return kSpinUsDefault;
  return v > 100000 ? 100000 : static_cast<int>(v);
}

}  // namespace

// More lanes than the machine has cores never spin: a spinning lane would take the core a
// lane with work is waiting for.
ThreadPool::ThreadPool(int size)
    : size_(size),
      spin_us_(static_cast<unsigned>(size) > std::max(1u, std::thread::hardware_concurrency())
                   ? 0
                   : spin_us_from_env()) {
  for (int lane = 1; lane < size; ++lane) workers_.emplace_back([this, lane] { worker(lane); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run(int lanes, void (*fn)(void*, int), void* ctx) {
  if (lanes <= 1) {
    fn(ctx, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = fn;
    ctx_ = ctx;
    lanes_ = lanes;
    pending_.store(lanes - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();  // no system call while every lane is still spinning
  fn(ctx, 0);
  if (spin_until(spin_us_, [this] { return pending_.load(std::memory_order_acquire) == 0; })) return;
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
}

void ThreadPool::worker(int lane) {
  std::uint64_t seen = 0;
  for (;;) {
    spin_until(spin_us_, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    void (*fn)(void*, int) = nullptr;
    void* ctx = nullptr;
    {
      // The hand-over's fields are read under the lock with the generation they belong to.
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_relaxed) != seen; });
      if (stop_) return;
      seen = generation_.load(std::memory_order_relaxed);
      if (lane >= lanes_) continue;
      fn = fn_;
      ctx = ctx_;
    }
    fn(ctx, lane);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);  // the caller checks pending_ under it before it sleeps
      done_cv_.notify_one();
    }
  }
}

}  // namespace remat::cpu
