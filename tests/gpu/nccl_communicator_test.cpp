// NcclCommunicator on one GPU, world size 1 (NCCL cannot place two ranks of one communicator
// on the same GPU, so more ranks need more GPUs). With one rank every collective's sum or
// gather is the rank's own data, so the expected values are the inputs: the checks are that
// NCCL runs each call on device buffers (and on a host buffer, staged) without changing or
// losing an element, at sizes that are not multiples of NCCL's chunks, that a call returns only
// once its stream has run it, and that the records count kinds and bytes. Skipped without a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include <cuda_runtime.h>

#include "core/dist/nccl_communicator.h"
#include "core/util/error.h"
#include "tests/gpu/gpu_test_util.h"

namespace remat::gputest {
namespace {

namespace fs = std::filesystem;

class NcclOne : public ::testing::Test {
 protected:
  void SetUp() override {
    REMAT_REQUIRE_GPU();
    dir_ = fs::temp_directory_path() / ("remat-nccl-gpu-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  NcclOptions options(const std::string& key = "id") const {
    NcclOptions o;
    o.store_dir = dir_.string();
    o.key = key;
    return o;
  }
  template <class T>
  T* device_copy(const std::vector<T>& v) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, v.size() * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    owned_.push_back(p);
    return static_cast<T*>(p);
  }
  template <class T>
  std::vector<T> host_copy(const T* p, std::size_t n) {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  ~NcclOne() override {
    for (void* p : owned_) cudaFree(p);
  }

  fs::path dir_;
  std::vector<void*> owned_;
};

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

std::vector<double> doubles(std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 1.0 / static_cast<double>(i + 3) - 0.25;
  return v;
}

TEST_F(NcclOne, RendezvousWritesTheIdFile) {
  NcclCommunicator c(options("first"));
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
  EXPECT_TRUE(c.moves_data());
  EXPECT_TRUE(c.device_memory());
  EXPECT_EQ(fs::file_size(dir_ / "first"), 128u);  // NCCL_UNIQUE_ID_BYTES
  // A second communicator beside the first, under its own key.
  NcclCommunicator d(options("second"));
  EXPECT_EQ(fs::file_size(dir_ / "second"), 128u);
}

TEST_F(NcclOne, AllReduceKeepsTheOneRanksValues) {
  NcclCommunicator c(options());
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{(1u << 22) + 3}}) {
    const std::vector<float> f = uniform(static_cast<std::int64_t>(n), -3.f, 3.f, n);
    float* df = device_copy(f);
    c.all_reduce_sum(df, n, "grads");
    EXPECT_TRUE(same_bits(host_copy(df, n), f)) << "float, n = " << n;
    const std::vector<double> d = doubles(n);
    double* dd = device_copy(d);
    c.all_reduce_sum(dd, n, "loss");
    EXPECT_TRUE(same_bits(host_copy(dd, n), d)) << "double, n = " << n;
  }
}

TEST_F(NcclOne, ReduceScatterAllGatherAndBroadcastOnDeviceBuffers) {
  NcclCommunicator c(options());
  const std::size_t shard = 300007;
  const std::vector<float> v = uniform(static_cast<std::int64_t>(shard), -1.f, 1.f, 7);
  float* p = device_copy(v);
  c.reduce_scatter_sum(p, shard, "grad shard");
  EXPECT_TRUE(same_bits(host_copy(p, shard), v));
  c.all_gather(p, shard, "param shards");
  EXPECT_TRUE(same_bits(host_copy(p, shard), v));
  c.broadcast(p, shard, 0, "weights");
  EXPECT_TRUE(same_bits(host_copy(p, shard), v));
  c.barrier("done");
  const std::string e = [&] {
    try {
      c.broadcast(p, shard, 1, "weights");
    } catch (const Error& x) {
      return std::string(x.what());
    }
    return std::string();
  }();
  EXPECT_NE(e.find("broadcast from rank 1 of 1"), std::string::npos) << e;
}

TEST_F(NcclOne, RecordsCountKindsAndBytes) {
  NcclCommunicator c(options());
  std::vector<float> f(1000, 1.f);
  std::vector<double> d(10, 2.0);
  float* df = device_copy(f);
  double* dd = device_copy(d);
  c.all_reduce_sum(df, 1000, "a");
  c.all_reduce_sum(dd, 10, "b");
  c.reduce_scatter_sum(df, 250, "c");
  c.all_gather(df, 100, "d");
  c.broadcast(df, 7, 0, "e");
  c.barrier("f");
  const auto& r = c.records();
  ASSERT_EQ(r.size(), 6u);
  const CommKind kinds[] = {CommKind::AllReduce, CommKind::AllReduce, CommKind::ReduceScatter,
                            CommKind::AllGather, CommKind::Broadcast, CommKind::Barrier};
  const std::uint64_t bytes[] = {4000, 80, 1000, 400, 28, 0};
  const char* whats[] = {"a", "b", "c", "d", "e", "f"};
  for (std::size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].kind, kinds[i]) << i;
    EXPECT_EQ(r[i].bytes, bytes[i]) << i;
    EXPECT_EQ(r[i].what, whats[i]) << i;
    EXPECT_EQ(r[i].ranks, 1) << i;
  }
  EXPECT_EQ(c.bytes_recorded(), 4000u + 80 + 1000 + 400 + 28);
}

TEST_F(NcclOne, HostBuffersAreStagedThroughTheDevice) {
  NcclCommunicator c(options());
  double loss = 2.75;
  c.all_reduce_sum(&loss, 1, "loss");
  EXPECT_EQ(loss, 2.75);
  std::vector<float> h = uniform(100000, -2.f, 2.f, 11);
  const std::vector<float> want = h;
  c.all_reduce_sum(h.data(), h.size(), "host grads");
  EXPECT_TRUE(same_bits(h, want));
  c.broadcast(h.data(), h.size(), 0, "host weights");
  EXPECT_TRUE(same_bits(h, want));
}

TEST_F(NcclOne, CallReturnsOnceItsStreamHasRunIt) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  {
    NcclOptions o = options();
    o.stream = s;
    NcclCommunicator c(o);
    EXPECT_EQ(c.stream(), s);
    const std::size_t n = std::size_t{16} << 20;  // 64 MiB: the copy before takes a while
    float* p = nullptr;
    float* host = nullptr;
    ASSERT_EQ(cudaMalloc(&p, n * sizeof(float)), cudaSuccess);
    owned_.push_back(p);
    ASSERT_EQ(cudaMallocHost(&host, n * sizeof(float)), cudaSuccess);
    for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 1000) * 0.5f;
    ASSERT_EQ(cudaMemcpyAsync(p, host, n * sizeof(float), cudaMemcpyHostToDevice, s),
              cudaSuccess);
    c.all_reduce_sum(p, n, "after a copy");
    EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);  // the copy and the all-reduce are done
    std::vector<float> back = host_copy(p, n);
    EXPECT_EQ(std::memcmp(back.data(), host, n * sizeof(float)), 0);
    cudaFreeHost(host);
  }
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace remat::gputest
