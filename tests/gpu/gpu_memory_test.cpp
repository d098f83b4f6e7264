// The CUDA backend's memory: the caching allocator's accounting and reuse, blocks held back
// while a copy still reads them, out-of-memory errors, copies between the spaces with the copy
// stream and joins, the workspace size, and bitwise determinism of the ops with reductions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "core/util/error.h"
#include "tests/gpu/gpu_test_util.h"

namespace remat::gputest {
namespace {

TEST(GpuDevice, CountAndDescribe) {
  std::string why;
  const int n = device_count(&why);
  if (n <= 0) GTEST_SKIP() << "no usable CUDA device: " << why;
  Dual d(std::size_t{64} << 20);
  bool has_gpu = false, has_cublas = false, has_driver = false;
  for (const auto& [k, v] : d.gpu->describe()) {
    has_gpu |= k == "gpu" && !v.empty();
    has_cublas |= k == "cublas" && !v.empty();
    has_driver |= k == "cuda_driver" && !v.empty();
  }
  EXPECT_TRUE(has_gpu && has_cublas && has_driver);
  EXPECT_EQ(d.gpu->name(), "cuda");
  EXPECT_TRUE(d.gpu->asynchronous());
  EXPECT_GT(d.gpu->available_memory(), 0u);
}

TEST(GpuAllocator, ReservedIsTheSumOfDriverAllocations) {
  REMAT_REQUIRE_GPU();
  Dual d(std::size_t{64} << 20);
  cuda::CachingPool& pool = d.gpu->device_pool();
  const std::uint64_t calls0 = pool.malloc_calls();
  std::vector<std::pair<void*, std::size_t>> live;
  for (std::size_t bytes : {std::size_t{1}, std::size_t{1000}, std::size_t{4096},
                            std::size_t{3} << 20, std::size_t{100} << 20, std::size_t{777777}})
    live.emplace_back(pool.allocate(bytes), bytes);
  auto seg = pool.segment_sizes();
  const std::uint64_t sum = std::accumulate(seg.begin(), seg.end(), std::uint64_t{0});
  EXPECT_EQ(pool.reserved_bytes(), sum);
  EXPECT_LE(pool.allocated_bytes(), pool.reserved_bytes());
  EXPECT_EQ(pool.malloc_calls() - calls0, live.size());
  for (auto& [p, b] : live) EXPECT_GE(cuda::CachingPool::size_class(b), b);
  // A freed block is reused for the same size class without a new cudaMalloc.
  void* p = live[4].first;
  pool.deallocate(p, live[4].second);
  EXPECT_LT(pool.allocated_bytes(), pool.reserved_bytes());
  void* q = pool.allocate(live[4].second);
  EXPECT_EQ(p, q);
  EXPECT_EQ(pool.malloc_calls() - calls0, live.size());
  for (auto& [ptr, b] : live) pool.deallocate(ptr, b);
  EXPECT_EQ(pool.allocated_bytes() + pool.cached_bytes(), pool.reserved_bytes());
  // Releasing the cache gives the memory back to the driver.
  pool.release_cached();
  seg = pool.segment_sizes();
  EXPECT_EQ(pool.reserved_bytes(), std::accumulate(seg.begin(), seg.end(), std::uint64_t{0}));
  EXPECT_EQ(pool.reserved_bytes(), pool.allocated_bytes());
}

TEST(GpuAllocator, BlockStaysParkedWhileACopyReadsIt) {
  REMAT_REQUIRE_GPU();
  Dual d(std::size_t{64} << 20);
  cuda::CudaBackend& g = *d.gpu;
  cuda::CachingPool& pool = g.device_pool();
  const std::int64_t n = std::int64_t{64} << 20;  // 256 MiB of fp32: the copy takes a while
  const std::size_t bytes = static_cast<std::size_t>(n) * 4;
  Tensor src;
  src.dtype = DType::F32;
  src.numel = n;
  src.data = pool.allocate(bytes);
  g.fill_zero(src);
  Tensor host = src;
  host.space = Space::Host;
  host.data = g.memory(Space::Host).allocate(bytes);
  // Offload, then free the source at once, as the executor does.
  g.copy(host, src);
  pool.deallocate(src.data, bytes);
  const bool parked = pool.parked_blocks() > 0;
  EXPECT_TRUE(parked) << "the 256 MiB copy finished before the free (unexpectedly fast)";
  void* again = pool.allocate(bytes);
  if (parked) EXPECT_NE(again, src.data) << "a block was reused while a copy still read it";
  g.synchronize();
  pool.deallocate(again, bytes);
  void* third = pool.allocate(bytes);  // the copy is done: parked blocks come back
  EXPECT_EQ(pool.parked_blocks(), 0u);
  pool.deallocate(third, bytes);
  g.memory(Space::Host).deallocate(host.data, bytes);
  auto seg = pool.segment_sizes();
  EXPECT_EQ(pool.reserved_bytes(), std::accumulate(seg.begin(), seg.end(), std::uint64_t{0}));
}

TEST(GpuAllocator, OutOfMemoryNamesTheRequest) {
  REMAT_REQUIRE_GPU();
  Dual d(std::size_t{64} << 20);
  const std::size_t huge = std::size_t{1} << 50;
  try {
    d.gpu->memory(Space::Device).allocate(huge);
    FAIL() << "allocating 1 PiB succeeded";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.needed(), huge);
    EXPECT_GT(e.available(), 0u);
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  // The allocator still works afterwards.
  void* p = d.gpu->memory(Space::Device).allocate(1024);
  d.gpu->memory(Space::Device).deallocate(p, 1024);
}

TEST(GpuCopies, OffloadPrefetchRoundTrip) {
  REMAT_REQUIRE_GPU();
  Dual d(std::size_t{64} << 20);
  cuda::CudaBackend& g = *d.gpu;
  const std::int64_t n = 1 << 20;
  Both src = d.random(DType::BF16, n, -1.0f, 1.0f, 1);
  Tensor host = d.gpu_alloc(DType::BF16, n, Space::Host);
  Tensor back = d.gpu_alloc(DType::BF16, n);
  Tensor y = d.gpu_alloc(DType::BF16, n);
  g.gelu_fwd(src.g, y, n);   // compute before the offload: the copy must see it
  g.copy(host, y);           // D2H on the copy stream
  g.copy(back, host);        // H2D on the copy stream
  g.join_copies();
  Tensor y2 = d.gpu_alloc(DType::BF16, n);
  g.gelu_bwd(back, back, y2, n, false);  // compute after the join reads the prefetched data
  EXPECT_EQ(d.gpu_bytes(back), d.gpu_bytes(y));
  std::vector<float> hv;
  g.read(host, hv);
  std::vector<float> yv;
  g.read(y, yv);
  EXPECT_EQ(hv, yv);
  // Host-to-host and reading/writing host tensors.
  Tensor host2 = d.gpu_alloc(DType::BF16, n, Space::Host);
  g.copy(host2, host);
  g.synchronize();
  EXPECT_EQ(std::memcmp(host2.data, host.data, host.bytes()), 0);
  cuda::CachingPool& hp = g.host_pool();
  auto seg = hp.segment_sizes();
  EXPECT_EQ(hp.reserved_bytes(), std::accumulate(seg.begin(), seg.end(), std::uint64_t{0}));
}

TEST(GpuWorkspace, CoversAGpt2Model) {
  REMAT_REQUIRE_GPU();
  Dual d(std::size_t{64} << 20);
  ModelConfig m;
  set_family(m, Family::Gpt2);
  m.layers = 12;
  m.hidden = 768;
  m.heads = 12;
  m.kv_heads = 12;
  m.ffn = 3072;
  m.seq = 1024;
  m.positions = 1024;
  m.batch = 8;
  m.vocab = 50304;
  m.attention = AttentionImpl::Flash;
  const std::uint64_t flash = d.gpu->workspace_bytes(m);
  m.attention = AttentionImpl::Naive;
  const std::uint64_t naive = d.gpu->workspace_bytes(m);
  EXPECT_GE(flash, cuda::CudaBackend::kGemmWorkspace);
  EXPECT_GE(naive, cuda::CudaBackend::kGemmWorkspace + 8ull * 1024 * 1024 * 4);
  EXPECT_LT(flash, std::uint64_t{1} << 30);
  EXPECT_EQ(d.gpu->workspace_bytes(m), naive) << "workspace_bytes is not a pure function";
}

// Two runs of every op with a reduction give the same bits.
TEST(GpuDeterminism, SameInputsSameBits) {
  REMAT_REQUIRE_GPU();
  Dual d;
  cuda::CudaBackend& g = *d.gpu;
  const DType dt = DType::BF16;
  const int B = 4, S = 64, H = 256, V = 300;
  const std::int64_t rows = static_cast<std::int64_t>(B) * S;
  std::vector<float> tok = uniform(rows, 0.0f, 20.0f, 1);  // many repeats
  for (auto& t : tok) t = std::floor(t);
  Both tokens = d.upload(DType::I32, tok);
  Both x = d.random(dt, rows * H, -1.0f, 1.0f, 2);
  Both dy = d.random(dt, rows * H, -1.0f, 1.0f, 3);
  Both w = d.random(dt, H, 0.5f, 1.5f, 4);
  Both W = d.random(dt, static_cast<std::int64_t>(V) * H, -0.2f, 0.2f, 5);
  std::vector<float> tg = uniform(rows, 0.0f, static_cast<float>(V), 6);
  for (auto& t : tg) t = std::floor(t);
  Both targets = d.upload(DType::I32, tg);
  auto run = [&]() {
    std::vector<std::vector<std::uint8_t>> out;
    Both dwte = d.upload(dt, std::vector<float>(static_cast<std::size_t>(V) * H, 0.0f));
    g.embedding_bwd(tokens.g, dy.g, dwte.g, nullptr, B, S, H, 1.0f);
    out.push_back(d.gpu_bytes(dwte.g));
    Both dx = d.alloc(dt, rows * H), dw = d.upload(dt, std::vector<float>(H, 0.0f)),
         db = d.upload(dt, std::vector<float>(H, 0.0f));
    g.layernorm_bwd(x.g, w.g, dy.g, dx.g, dw.g, db.g, rows, H, 1e-5f, false);
    out.push_back(d.gpu_bytes(dx.g));
    out.push_back(d.gpu_bytes(dw.g));
    out.push_back(d.gpu_bytes(db.g));
    g.rmsnorm_bwd(x.g, w.g, dy.g, dx.g, dw.g, rows, H, 1e-5f, false, 0.0f);
    out.push_back(d.gpu_bytes(dx.g));
    out.push_back(d.gpu_bytes(dw.g));
    Both dxl = d.alloc(dt, rows * H), dWl = d.upload(dt, std::vector<float>(static_cast<std::size_t>(H) * H, 0.0f)),
         dbl = d.upload(dt, std::vector<float>(H, 0.0f));
    Tensor t1 = dxl.g, t2 = dbl.g;
    g.linear_bwd(x.g, dwte.g.slice(0, static_cast<std::int64_t>(H) * H), dy.g, &t1, dWl.g, &t2,
                 rows, H, H, false);
    out.push_back(d.gpu_bytes(dxl.g));
    out.push_back(d.gpu_bytes(dWl.g));
    out.push_back(d.gpu_bytes(dbl.g));
    Both losses = d.alloc(DType::F32, rows), dxh = d.alloc(dt, rows * H),
         dWh = d.upload(dt, std::vector<float>(static_cast<std::size_t>(V) * H, 0.0f));
    g.head_loss(x.g, W.g, targets.g, losses.g, dxh.g, dWh.g, rows, H, V, 1.0f / rows, 0.0f, 1.0f);
    out.push_back(d.gpu_bytes(losses.g));
    out.push_back(d.gpu_bytes(dxh.g));
    out.push_back(d.gpu_bytes(dWh.g));
    return out;
  };
  const auto a = run();
  const auto b = run();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "output " << i << " differs";
}

}  // namespace
}  // namespace remat::gputest
