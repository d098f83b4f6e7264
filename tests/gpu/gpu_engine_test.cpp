// Whole training steps on CUDA through the real executor: against the CPU backend in fp32,
// every policy bitwise equal to `none` on CUDA, flash against naive attention, and the caching
// allocator's reserved bytes against the cudaMalloc calls CUPTI observes.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/cuda_entry.h"
#include "core/backend/cuda_sizing.h"
#include "core/backend/null/cuda_target.h"
#include "core/engine/simulator.h"
#include "core/engine/run.h"
#include "core/model/model_source.h"
#include "core/plugin/registry.h"
#include "core/profiler/host_profiler.h"
#include "core/schedule/schedule.h"
#include "gpu_test_util.h"
#include "kernels/embedding.cuh"

namespace remat {
namespace {

std::unique_ptr<Backend> cuda_backend() {
  char err[512] = {0};
  std::unique_ptr<Backend> b(remat_cuda_backend_create(0, err, sizeof err));
  EXPECT_TRUE(b) << err;
  return b;
}

Trace train(Backend& be, Profiler* prof, Clock& clock, const ModelConfig& m, const Schedule& s,
            int steps, int warmup = 0) {
  RunSpec spec;
  spec.model = m;
  spec.schedule = s;
  spec.steps = steps;
  spec.warmup = warmup;
  spec.seed = 11;
  Trace t = run_training(spec, be, prof, clock);
  EXPECT_TRUE(t.complete) << t.status << ": " << t.error;
  return t;
}

TEST(GpuEngine, SmallStepMatchesTheCpuInFp32OverFiveSteps) {
  REMAT_REQUIRE_GPU();
  ModelConfig m = resolve_model("small");
  m.dtype = DType::F32;
  SteadyClock clock;
  CpuBackend cpu(4);
  Trace c = train(cpu, nullptr, clock, m, store_all_schedule(m.layers), 5);
  auto gpu = cuda_backend();
  ASSERT_TRUE(gpu);
  Trace g = train(*gpu, nullptr, clock, m, store_all_schedule(m.layers), 5);
  auto lc = c.losses(), lg = g.losses();
  ASSERT_EQ(lc.size(), 5u);
  ASSERT_EQ(lg.size(), 5u);
  for (std::size_t i = 0; i < lc.size(); ++i)
    EXPECT_LE(std::abs(lg[i] - lc[i]), 1e-4 * std::abs(lc[i])) << "step " << i << ": cuda " << lg[i] << " cpu " << lc[i];
  EXPECT_EQ(g.peak_bytes, g.predicted_peak_bytes);
}

TEST(GpuEngine, EveryPolicyIsBitwiseEqualToNoneOnCuda) {
  REMAT_REQUIRE_GPU();
  PolicyRegistry reg;
  reg.load_dirs(PolicyRegistry::default_dirs());
  ASSERT_TRUE(reg.find("none")) << "no plugins next to the test binary";
  for (AttentionImpl attn : {AttentionImpl::Naive, AttentionImpl::Flash}) {
    ModelConfig m = resolve_model("tiny");  // gpt2, dropout 0.1, bf16
    m.attention = attn;
    auto gpu = cuda_backend();
    ASSERT_TRUE(gpu);
    SteadyClock clock;
    Trace base = train(*gpu, nullptr, clock, m, reg.plan(parse_policy_choice("none"), m), 2);
    std::uint64_t budget = base.activation_peak_bytes / 2;
    for (const char* p : {"selective", "uniform", "uniform:segments=4", "revolve:snapshots=2", "offload",
                          "offload:what=checkpoints", "budget"}) {
      Schedule s = reg.plan(parse_policy_choice(p), m,
                            std::string(p) == "budget" ? std::optional<std::uint64_t>(budget) : std::nullopt);
      Trace t = train(*gpu, nullptr, clock, m, s, 2);
      EXPECT_EQ(t.losses(), base.losses()) << p << " " << to_string(attn);
      EXPECT_EQ(t.grad_checksum, base.grad_checksum) << p << " " << to_string(attn);
      EXPECT_EQ(t.peak_bytes, t.predicted_peak_bytes) << p << " " << to_string(attn);
      EXPECT_LT(t.peak_bytes, base.peak_bytes) << p << " " << to_string(attn);
    }
  }
}

TEST(GpuEngine, FlashAndNaiveAttentionAgree) {
  REMAT_REQUIRE_GPU();
  ModelConfig m = resolve_model("llama-tiny");
  m.dtype = DType::F32;
  m.dropout = 0.1;
  auto gpu = cuda_backend();
  ASSERT_TRUE(gpu);
  SteadyClock clock;
  m.attention = AttentionImpl::Naive;
  Trace n = train(*gpu, nullptr, clock, m, store_all_schedule(m.layers), 3);
  m.attention = AttentionImpl::Flash;
  Trace f = train(*gpu, nullptr, clock, m, store_all_schedule(m.layers), 3);
  auto ln = n.losses(), lf = f.losses();
  ASSERT_EQ(ln.size(), lf.size());
  for (std::size_t i = 0; i < ln.size(); ++i)
    EXPECT_LE(std::abs(lf[i] - ln[i]), 1e-4 * std::abs(ln[i])) << "step " << i;
  EXPECT_LT(f.peak_bytes, n.peak_bytes);
}

TEST(GpuEngine, ReservedBytesEqualTheCudaMallocsCuptiObserves) {
  REMAT_REQUIRE_GPU();
  ModelConfig m = resolve_model("small");
  auto gpu = cuda_backend();
  ASSERT_TRUE(gpu);
  auto* cb = dynamic_cast<cuda::CudaBackend*>(gpu.get());
  ASSERT_NE(cb, nullptr);
  SteadyClock clock;
  // A first run warms cuBLAS and CUB, so the profiled run's driver allocations are ours alone.
  train(*gpu, nullptr, clock, m, store_all_schedule(m.layers), 1);
  cb->device_pool().release_cached();
  const std::uint64_t reserved0 = cb->device_pool().reserved_bytes();
  char err[512] = {0};
  std::unique_ptr<Profiler> prof(remat_cuda_profiler_create(gpu.get(), &clock, err, sizeof err));
  ASSERT_TRUE(prof) << err;
  Trace t = train(*gpu, prof.get(), clock, m, store_all_schedule(m.layers), 1);
  std::int64_t observed = 0;
  int allocations = 0;
  for (const auto& r : t.ops) {
    if (r.name == "memory allocation (device)") {
      observed += static_cast<std::int64_t>(r.bytes);
      ++allocations;
    } else if (r.name == "memory release (device)") {
      observed -= static_cast<std::int64_t>(r.bytes);
    }
  }
  const std::uint64_t reserved1 = cb->device_pool().reserved_bytes();
  EXPECT_GT(allocations, 0);
  EXPECT_EQ(static_cast<std::int64_t>(reserved1 - reserved0), observed);
  // Allocated never exceeds reserved at any event of the run.
  std::int64_t live = 0;
  for (const auto& e : t.events) {
    if (e.space != Space::Device) continue;
    live += e.delta;
    EXPECT_LE(static_cast<std::uint64_t>(live), e.reserved);
    if (static_cast<std::uint64_t>(live) > e.reserved) break;
  }
}

// What `plan --device cuda` predicts without a GPU is what the CUDA backend sizes and holds: its
// workspace by the same rules (with CUB's own sort storage here; the bound plan takes covers it),
// and its caching allocator's reserved bytes over a fresh backend's step.
TEST(GpuEngine, PlanForACudaRankIsWhatItsRunHolds) {
  REMAT_REQUIRE_GPU();
  ModelConfig m = resolve_model("small");
  auto gpu = cuda_backend();
  ASSERT_TRUE(gpu);
  auto* cb = dynamic_cast<cuda::CudaBackend*>(gpu.get());
  ASSERT_NE(cb, nullptr);
  EXPECT_EQ(gpu->workspace_bytes(m),
            cuda_workspace_bytes(m, cb->head_chunk_bytes(), kernels::embedding_bwd_scratch_bytes(m.tokens())));
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{4096}, m.tokens(), std::int64_t{1} << 22})
    EXPECT_GE(kernels::embedding_bwd_scratch_bound(n), kernels::embedding_bwd_scratch_bytes(n)) << n;
  EXPECT_GE(CudaTarget().workspace_bytes(m), gpu->workspace_bytes(m));
  const Schedule s = store_all_schedule(m.layers);
  const Prediction predicted = simulate(m, s, gpu.get());
  SteadyClock clock;
  Trace t = train(*gpu, nullptr, clock, m, s, 1);
  std::uint64_t reserved = 0;
  for (const auto& e : t.events)
    if (e.space == Space::Device) reserved = std::max(reserved, e.reserved);
  EXPECT_EQ(reserved, predicted.reserved_bytes);
  EXPECT_EQ(t.peak_bytes, predicted.peak_bytes);
}

}  // namespace
}  // namespace remat
