// The CUDA backend's memory rules as a plan for a CUDA rank uses them without a GPU
// (core/backend/cuda_sizing.h): the caching allocator's size classes, the bytes it reserves over
// a step's events, and the workspace, each worked out here by hand. (Against the CUDA backend
// itself: GpuEngine.PlanForACudaRankIsWhatItsRunHolds, which needs a GPU.)
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cuda_sizing.h"
#include "core/backend/null/cuda_target.h"
#include "core/engine/simulator.h"
#include "core/model/model_source.h"
#include "kernels/scratch_bytes.h"

namespace remat {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(CudaSizing, SizeClassesAre512BytesBelowAMebibyteThenSixteenthsOfAPowerOfTwo) {
  EXPECT_EQ(cuda_size_class(0), 512u);
  EXPECT_EQ(cuda_size_class(1), 512u);
  EXPECT_EQ(cuda_size_class(512), 512u);
  EXPECT_EQ(cuda_size_class(513), 1024u);
  EXPECT_EQ(cuda_size_class(kMiB - 1), kMiB);
  EXPECT_EQ(cuda_size_class(kMiB), kMiB);
  EXPECT_EQ(cuda_size_class(kMiB + 1), kMiB + 64 * 1024);
  EXPECT_EQ(cuda_size_class(3 * kMiB + 1), 3 * kMiB + 128 * 1024);
  EXPECT_EQ(cuda_size_class(64 * kMiB + 1), 68 * kMiB);
  for (std::size_t b = kMiB; b < (std::size_t{1} << 34); b = b * 3 / 2 + 7) {
    const std::size_t c = cuda_size_class(b);
    EXPECT_GE(c, b);
    EXPECT_LE(static_cast<double>(c - b), static_cast<double>(b) / 16) << b;
  }
}

MemoryEvent device(std::int64_t delta) {
  MemoryEvent e;
  e.delta = delta;
  return e;
}

TEST(CudaSizing, ReservedBytesKeepTheMostBlocksEachSizeClassEverHadLive) {
  std::vector<MemoryEvent> ev = {device(600), device(700), device(-600), device(1000)};  // class 1024
  EXPECT_EQ(cuda_pool_bytes(ev).reserved, 2u * 1024);  // the freed block serves the 1000 bytes
  EXPECT_EQ(cuda_pool_bytes(ev).rounded_peak, 2u * 1024);
  ev.push_back(device(2 * kMiB));
  ev.push_back(device(-2 * static_cast<std::int64_t>(kMiB)));
  ev.push_back(device(2 * kMiB - 5));  // the same class: the cached block again
  EXPECT_EQ(cuda_pool_bytes(ev).reserved, 2u * 1024 + 2 * kMiB);
  ev.push_back(device(1500));  // class 1536: a block of its own, though 1024-blocks are free
  EXPECT_EQ(cuda_pool_bytes(ev).reserved, 2u * 1024 + 2 * kMiB + 1536);
  // Live at once at most: the two 1024-blocks and the 2 MiB one, then with the 1536 one.
  EXPECT_EQ(cuda_pool_bytes(ev).rounded_peak, 2u * 1024 + 2 * kMiB + 1536);
  ev.push_back(device(-2 * static_cast<std::int64_t>(kMiB) + 5));
  ev.push_back(device(3000));  // class 3072 while the 2 MiB block is cached: reserved grows, live does not
  EXPECT_EQ(cuda_pool_bytes(ev).reserved, 2u * 1024 + 2 * kMiB + 1536 + 3072);
  EXPECT_EQ(cuda_pool_bytes(ev).rounded_peak, 2u * 1024 + 2 * kMiB + 1536);
  MemoryEvent host = device(4 * kMiB);
  host.space = Space::Host;  // the pinned pool is not the device's
  ev.push_back(host);
  EXPECT_EQ(cuda_pool_bytes(ev).reserved, 2u * 1024 + 2 * kMiB + 1536 + 3072);
}

ModelConfig small_model() {
  ModelConfig m = resolve_model("llama-tiny");
  m.batch = 1;
  m.seq = 512;
  m.positions = 512;
  m.heads = 4;
  m.kv_heads = 4;
  m.hidden = 64;
  m.ffn = 128;
  m.vocab = 64;
  m.dtype = DType::F32;
  m.attention = AttentionImpl::Naive;
  return m;
}

TEST(CudaSizing, TheWorkspaceIsTheGemmWorkspaceAndTheLargestScratch) {
  ModelConfig m = small_model();
  m.validate();
  // Naive attention's fp32 scores of one head, [1, 512, 512]: 1 MiB. The head's logits and their
  // gradient (512 rows of 64, fp32): 256 KiB. Without a device the embedding backward's bound,
  // three 512·4 B token arrays, CUB's second copy of keys and values (512·8 B), 512 B and 4 MiB,
  // is larger than both.
  EXPECT_EQ(cuda_workspace_bytes(m), kCudaGemmWorkspaceBytes + 3 * 2048 + 4096 + 512 + 4 * kMiB);
  EXPECT_EQ(cuda_workspace_bytes(m, kCudaHeadChunkBytes, 1000), kCudaGemmWorkspaceBytes + kMiB);
  m.attention = AttentionImpl::Flash;  // its scratch is 1·4·512·4 B: the head's 256 KiB rules
  EXPECT_EQ(cuda_workspace_bytes(m, kCudaHeadChunkBytes, 1000), kCudaGemmWorkspaceBytes + 256 * 1024);
  // A head chunk of 128 rows (128·64·4 B of fp32 logits): 64 KiB of logits and as much gradient.
  EXPECT_EQ(cuda_workspace_bytes(m, 128 * 64 * 4, 1000), kCudaGemmWorkspaceBytes + 64 * 1024);
  EXPECT_EQ(CudaTarget().workspace_bytes(m), cuda_workspace_bytes(m));
  EXPECT_EQ(cuda_head_chunk_rows(512, 64, 128 * 64 * 4), 128);
  EXPECT_EQ(cuda_head_chunk_rows(512, 50257, kCudaHeadChunkBytes), 320);
}

TEST(CudaSizing, APlanForACudaRankHasItsWorkspaceAndReservedBytes) {
  ModelConfig m = small_model();
  m.validate();
  const Schedule s = store_all_schedule(m.layers);
  const CudaTarget cuda;
  const CpuBackend cpu(1);
  const Prediction on_cuda = simulate(m, s, &cuda), on_cpu = simulate(m, s, &cpu);
  EXPECT_EQ(on_cuda.workspace_bytes, cuda_workspace_bytes(m));
  EXPECT_EQ(on_cpu.workspace_bytes, cpu.workspace_bytes(m));
  EXPECT_EQ(on_cuda.activation_peak_bytes, on_cpu.activation_peak_bytes);  // the same walk
  EXPECT_EQ(on_cuda.peak_bytes - on_cuda.workspace_bytes, on_cpu.peak_bytes - on_cpu.workspace_bytes);
  EXPECT_EQ(on_cpu.reserved_bytes, 0u);  // the CPU backend has no caching allocator
  // Every live block at the peak is held, each rounded up to its class.
  EXPECT_GE(on_cuda.reserved_bytes, on_cuda.rounded_peak_bytes);
  EXPECT_GE(on_cuda.rounded_peak_bytes, on_cuda.peak_bytes);
  EXPECT_LE(on_cuda.reserved_bytes, on_cuda.peak_bytes * 2);
}

}  // namespace
}  // namespace remat
