// The CPU backend's thread pool: every lane below the requested count runs exactly once per call,
// whatever the spin setting (never spinning, the default, a long spin), over thousands of calls
// with changing lane counts; REMAT_POOL_SPIN_US is read with its bounds; a pool of more lanes
// than cores never spins; an idle pool sleeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <vector>

#include "core/backend/cpu/cpu_thread_pool.h"

namespace remat {
namespace {

using cpu::ThreadPool;

struct SpinEnv {
  explicit SpinEnv(const char* v) {
    if (v) setenv("REMAT_POOL_SPIN_US", v, 1);
    else unsetenv("REMAT_POOL_SPIN_US");
  }
  ~SpinEnv() { unsetenv("REMAT_POOL_SPIN_US"); }
};

// Two lanes: no more than the cores of any machine the suite runs on, so the pool may spin.
bool can_spin() { return std::thread::hardware_concurrency() >= 2; }

struct Calls {
  explicit Calls(int lanes) : ran(static_cast<std::size_t>(lanes)) {}
  std::vector<std::atomic<int>> ran;
};

void every_lane_once(ThreadPool& pool) {
  Calls c(pool.size());
  long expected = 0;
  for (int i = 0; i < 3000; ++i) {
    const int lanes = 1 + i % pool.size();
    for (auto& r : c.ran) r.store(0);
    pool.run(lanes, [](void* ctx, int lane) { static_cast<Calls*>(ctx)->ran[lane].fetch_add(1); }, &c);
    for (int l = 0; l < pool.size(); ++l) ASSERT_EQ(c.ran[l].load(), l < lanes ? 1 : 0) << "call " << i << ", lane " << l;
    expected += lanes;
  }
  EXPECT_GT(expected, 3000);
}

TEST(CpuThreadPool, EveryLaneRunsOncePerCallWithoutSpinning) {
  SpinEnv s("0");
  ThreadPool pool(2);
  EXPECT_EQ(pool.spin_us(), 0);
  every_lane_once(pool);
}

TEST(CpuThreadPool, EveryLaneRunsOncePerCallWithTheDefaultSpin) {
  SpinEnv s(nullptr);
  ThreadPool pool(2);
  if (can_spin()) EXPECT_GT(pool.spin_us(), 0);
  every_lane_once(pool);
}

TEST(CpuThreadPool, EveryLaneRunsOncePerCallWithALongSpin) {
  SpinEnv s("2000");
  ThreadPool pool(2);
  if (can_spin()) EXPECT_EQ(pool.spin_us(), 2000);
  every_lane_once(pool);
}

TEST(CpuThreadPool, SpinSettingIsBounded) {
  const int def = [] {
    SpinEnv s(nullptr);
    return ThreadPool(1).spin_us();
  }();
  for (const char* bad : {"", "abc", "-5", "12x"}) {
    SpinEnv s(bad);
    EXPECT_EQ(ThreadPool(1).spin_us(), def) << "'" << bad << "'";
  }
  SpinEnv s("999999999");
  EXPECT_EQ(ThreadPool(1).spin_us(), 100000);
}

TEST(CpuThreadPool, MoreLanesThanCoresNeverSpin) {
  SpinEnv s("5000");
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ThreadPool pool(cores + 1);
  EXPECT_EQ(pool.spin_us(), 0);
  every_lane_once(pool);
}

double process_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

TEST(CpuThreadPool, AnIdlePoolSleeps) {
  SpinEnv s("1000");  // 1 ms of spin at most after the last call
  ThreadPool pool(2);
  int x = 0;
  pool.run(2, [](void* ctx, int) { static_cast<std::atomic_ref<int>>(*static_cast<int*>(ctx)).fetch_add(1); }, &x);
  EXPECT_EQ(x, 2);
  const double before = process_cpu_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // A lane spinning through the whole wait would take 300 ms of CPU; a sleeping one ~1.
  EXPECT_LT(process_cpu_ms() - before, 150.0);
}

}  // namespace
}  // namespace remat
