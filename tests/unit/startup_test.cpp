// Start-up: where the time before the first step goes (Trace::startup_breakdown_ms), and memory
// that comes zeroed from the system standing in for written zeros without changing a bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/data/corpus.h"
#include "core/engine/executor.h"
#include "core/engine/model_state.h"
#include "core/memory/memory_resource.h"
#include "core/schedule/schedule.h"
#include "core/trace/summary.h"
#include "engine_test_util.h"

namespace remat {
namespace {

TEST(StartUp, TheBreakdownNamesTheRunsPartsAndAddsUpToTheStartUp) {
  ModelConfig m = testing::small_model(Family::Gpt2, AttentionImpl::Naive, 0.0);
  Trace t = testing::train(m, store_all_schedule(m.layers), 1, 3, false, 1);
  ASSERT_TRUE(t.complete) << t.error;
  const std::vector<std::string> want = {"simulate", "corpus", "memory", "weights", "executor", "batch"};
  ASSERT_EQ(t.startup_breakdown_ms.size(), want.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(t.startup_breakdown_ms[i].first, want[i]);
    EXPECT_GE(t.startup_breakdown_ms[i].second, 0.0) << want[i];
    sum += t.startup_breakdown_ms[i].second;
  }
  EXPECT_NEAR(sum, t.startup_ms, 1e-6 * t.startup_ms + 1e-9);
  const nlohmann::json j = summary_json(t);
  ASSERT_TRUE(j.contains("startup_breakdown_ms"));
  for (const auto& [part, ms] : t.startup_breakdown_ms)
    EXPECT_DOUBLE_EQ(j["startup_breakdown_ms"][part].get<double>(), ms) << part;
  EXPECT_FALSE(summary_json(Trace{}).contains("startup_breakdown_ms"));
}

TEST(StartUp, LargeHeapBlocksComeZeroedAfterTheirMemoryWasUsed) {
  constexpr std::size_t kBig = std::size_t{3} << 20, kSmall = 1000;
  HeapMemory mem(std::size_t{1} << 20);
  EXPECT_TRUE(mem.allocates_zeroed(kBig));
  EXPECT_FALSE(mem.allocates_zeroed(kSmall));
  EXPECT_FALSE(HeapMemory().allocates_zeroed(kBig));  // below the default: from malloc
  EXPECT_FALSE(VirtualMemory().allocates_zeroed(kBig));
  for (int round = 0; round < 3; ++round) {
    auto* p = static_cast<unsigned char*>(mem.allocate(kBig));
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
    std::size_t nonzero = 0;
    for (std::size_t i = 0; i < kBig; ++i) nonzero += p[i] != 0;
    EXPECT_EQ(nonzero, 0u) << "round " << round;
    std::memset(p, 0xAB, kBig);  // dirty it before it goes back
    EXPECT_EQ(mem.reserved_bytes(), kBig);
    mem.deallocate(p, kBig);
    EXPECT_EQ(mem.reserved_bytes(), 0u);
  }
}

// Heap memory filled with NaN bytes as it is handed out: whatever is not written reads as NaN.
class DirtyHeap final : public MemoryResource {
 public:
  void* allocate(std::size_t bytes) override {
    void* p = heap_.allocate(bytes);
    std::memset(p, 0xFF, bytes);
    return p;
  }
  void deallocate(void* p, std::size_t bytes) override { heap_.deallocate(p, bytes); }
  void poison(void* p, std::size_t bytes) override { heap_.poison(p, bytes); }
  std::uint64_t reserved_bytes() const override { return heap_.reserved_bytes(); }

 private:
  HeapMemory heap_{SIZE_MAX};
};

// The same steps on memory that comes zeroed (every block of a page or more from the system)
// and on dirty memory that must be written with zeros: the same loss, gradients, weights and
// moments.
struct StepBits {
  double loss = 0.0;
  std::uint64_t grad_checksum = 0;
  std::vector<float> params, m;
};

StepBits two_steps(const ModelConfig& cfg, MemoryResource& device, MemoryResource& host) {
  CpuBackend be(2);
  LogicalClock clock;
  TrackingAllocator alloc(device, host, clock);
  ModelState st(cfg, be, alloc);
  st.init_weights(7);
  Executor ex(st, be, alloc, nullptr, ExecOptions{});
  const Corpus corpus = Corpus::from_text(std::string(4096, 'a') + "the quick brown fox");
  StepBits out;
  for (int step = 0; step < 2; ++step) {
    std::vector<std::int32_t> tok, tgt;
    corpus.batch(7, step, cfg.batch, cfg.seq, cfg.vocab, tok, tgt);
    out.loss = ex.run_step(store_all_schedule(cfg.layers), step, tok, tgt).loss;
  }
  out.grad_checksum = st.grad_checksum();
  out.params = st.read_params();
  be.read(st.m, out.m);
  return out;
}

TEST(StartUp, ZeroedMemoryGivesTheBitsOfWrittenZeros) {
  ModelConfig cfg = testing::small_model(Family::Gpt2, AttentionImpl::Naive, 0.1);
  HeapMemory fresh_device(4096), fresh_host(4096);
  DirtyHeap dirty_device, dirty_host;
  ASSERT_TRUE(fresh_device.allocates_zeroed(std::size_t(4) * ParamLayout(cfg).total()));
  const StepBits fresh = two_steps(cfg, fresh_device, fresh_host);
  const StepBits written = two_steps(cfg, dirty_device, dirty_host);
  ASSERT_TRUE(std::isfinite(written.loss));
  EXPECT_EQ(std::memcmp(&fresh.loss, &written.loss, sizeof(double)), 0);
  EXPECT_EQ(fresh.grad_checksum, written.grad_checksum);
  ASSERT_EQ(fresh.params.size(), written.params.size());
  EXPECT_EQ(std::memcmp(fresh.params.data(), written.params.data(), fresh.params.size() * sizeof(float)), 0);
  ASSERT_EQ(fresh.m.size(), written.m.size());
  EXPECT_EQ(std::memcmp(fresh.m.data(), written.m.data(), fresh.m.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace remat
