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
#include <functional>
#include <thread>
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

// The calls with a count per rank and the 16-bit gather, at world size 1: every part is the
// rank's own, so the values stay; a host buffer is staged; the records count 2 bytes an element.
TEST_F(NcclOne, VariableCountsAnd16BitGathersKeepTheValues) {
  NcclCommunicator c(options());
  const std::size_t n = 100003;
  const std::vector<float> f = uniform(static_cast<std::int64_t>(n), -2.f, 2.f, 21);
  float* df = device_copy(f);
  c.reduce_scatter_sum_v(df, {n}, "zero.grads");
  EXPECT_TRUE(same_bits(host_copy(df, n), f));
  c.all_gather_v(df, {n}, "zero.params");
  EXPECT_TRUE(same_bits(host_copy(df, n), f));
  std::vector<std::uint16_t> h(n + 1);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<std::uint16_t>(i * 40503u + 0x7FC1u);  // NaN payloads too
  const std::vector<std::uint16_t> want = h;
  std::uint16_t* dh = device_copy(h);
  c.all_gather_v(dh, {h.size()}, "bf16 params");
  EXPECT_TRUE(same_bits(host_copy(dh, h.size()), want));
  c.all_gather(h.data(), h.size(), "bf16 host");  // staged
  EXPECT_TRUE(same_bits(h, want));
  ASSERT_EQ(c.records().size(), 4u);
  EXPECT_EQ(c.records()[2].bytes, 2 * h.size());
  EXPECT_EQ(c.records()[0].kind, CommKind::ReduceScatter);
}

// Two ranks on two GPUs, one thread each (NCCL takes several ranks in one process where each
// has its own device). Skipped with fewer than two GPUs.
class NcclTwo : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    const int n = device_count(&why);
    if (n < 2) GTEST_SKIP() << "needs two usable CUDA devices, found " << n << (why.empty() ? "" : ": " + why);
    dir_ = fs::temp_directory_path() / ("remat-nccl-two-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  // body(comm, rank) on both ranks at once; the first failure's text, or "".
  std::string on_both(const std::string& key, const std::function<void(NcclCommunicator&, int)>& body) {
    std::string failure[2];
    std::vector<std::thread> t;
    for (int r = 0; r < 2; ++r)
      t.emplace_back([&, r] {
        try {
          cudaSetDevice(r);
          NcclOptions o;
          o.rank = r;
          o.size = 2;
          o.device = r;
          o.store_dir = dir_.string();
          o.key = key;
          o.timeout = std::chrono::seconds(30);
          NcclCommunicator c(o);
          body(c, r);
        } catch (const std::exception& e) {
          failure[r] = "rank " + std::to_string(r) + ": " + e.what();
        }
      });
    for (auto& x : t) x.join();
    return failure[0].empty() ? failure[1] : failure[0];
  }
  fs::path dir_;
};

template <class T>
T* to_device(const std::vector<T>& v) {
  void* p = nullptr;
  if (cudaMalloc(&p, v.size() * sizeof(T) + 1) != cudaSuccess) throw Error("cudaMalloc");
  cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> from_device(T* p, std::size_t n) {
  std::vector<T> v(n);
  cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
  cudaFree(p);
  return v;
}

// Unequal parts, one of them empty (ZeRO's last shards): each rank's part summed on it, and
// every part gathered from its owner, fp32 and 16-bit.
TEST_F(NcclTwo, VariableCountsSumAndGatherEachRanksPart) {
  const std::vector<std::vector<std::size_t>> layouts = {{7, 0}, {0, 5}, {1000, 999}, {4096, 4096}};
  const std::string e = on_both("v", [&](NcclCommunicator& c, int r) {
    for (const auto& counts : layouts) {
      const std::size_t n = counts[0] + counts[1], mine = r == 0 ? 0 : counts[0];
      std::vector<float> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 97) * (r + 1) * 0.25f;
      float* d = to_device(v);
      c.reduce_scatter_sum_v(d, counts, "grads");
      const std::vector<float> got = from_device(d, n);
      for (std::size_t i = mine; i < mine + counts[static_cast<std::size_t>(r)]; ++i)
        if (got[i] != static_cast<float>(i % 97) * 0.75f) throw Error("reduce_scatter_v element " + std::to_string(i));
      std::vector<float> g(n, -1.0f);
      std::vector<std::uint16_t> g16(n, 0xFFFF);
      for (std::size_t i = mine; i < mine + counts[static_cast<std::size_t>(r)]; ++i) {
        g[i] = static_cast<float>(i);
        g16[i] = static_cast<std::uint16_t>(i * 3 + 1);
      }
      float* dg = to_device(g);
      std::uint16_t* dg16 = to_device(g16);
      c.all_gather_v(dg, counts, "params");
      c.all_gather_v(dg16, counts, "bf16 params");
      const std::vector<float> gg = from_device(dg, n);
      const std::vector<std::uint16_t> gg16 = from_device(dg16, n);
      for (std::size_t i = 0; i < n; ++i)
        if (gg[i] != static_cast<float>(i) || gg16[i] != static_cast<std::uint16_t>(i * 3 + 1))
          throw Error("all_gather_v element " + std::to_string(i));
    }
  });
  EXPECT_EQ(e, "");
}

// Both ranks send before they receive, at sizes past NCCL's eager buffers: a send leaves with
// the rank's next receive, in one group, so neither waits on the other. Then sends left with
// wait_sends, and a collective after a send.
TEST_F(NcclTwo, SendsLeaveWithTheNextReceiveOrAWait) {
  const std::size_t n = std::size_t{8} << 20;  // 32 MiB
  const std::string e = on_both("p2p", [&](NcclCommunicator& c, int r) {
    const int peer = 1 - r;
    float* out = to_device(std::vector<float>(n, static_cast<float>(r + 1)));
    float* in = to_device(std::vector<float>(n, 0.0f));
    c.send(out, n * sizeof(float), peer, "activation");
    c.recv(in, n * sizeof(float), peer, "grad");
    std::vector<float> got(n);
    cudaMemcpy(got.data(), in, n * sizeof(float), cudaMemcpyDeviceToHost);
    if (got[0] != static_cast<float>(peer + 1) || got[n - 1] != static_cast<float>(peer + 1))
      throw Error("the exchange delivered other values");
    // Rank 0 sends and waits; rank 1 receives. Then rank 1 sends, and an all-reduce follows.
    if (r == 0) {
      c.send(out, 1024, 1, "a");
      c.wait_sends();
    } else {
      c.recv(in, 1024, 0, "a");
      c.send(out, 4096, 0, "b");
    }
    if (r == 0) c.recv(in, 4096, 1, "b");
    float* one = to_device(std::vector<float>(3, 1.0f));
    c.all_reduce_sum(one, 3, "after the sends");
    if (from_device(one, 3)[2] != 2.0f) throw Error("all-reduce after the sends");
    c.send(out, 64, peer, "last");
    c.recv(in, 64, peer, "last");
    c.wait_sends();
    cudaFree(out);
    cudaFree(in);
    // A host buffer is refused for point-to-point transfers.
    std::vector<float> host(4);
    try {
      c.send(host.data(), 16, peer, "host");
      throw Error("a host buffer was taken");
    } catch (const Error& x) {
      if (std::string(x.what()).find("device memory") == std::string::npos) throw;
    }
  });
  EXPECT_EQ(e, "");
}

}  // namespace
}  // namespace remat::gputest
