// The collectives of core/dist: Gloo between ranks on threads of this process (TCP on loopback,
// a FileStore in a temporary directory), the null communicator's counting, the timeout; the
// loader of NCCL's communicator.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>
#include <unistd.h>

#include "core/dist/gloo_communicator.h"
#include "core/dist/nccl_loader.h"
#include "core/engine/data_parallel.h"
#include "core/util/error.h"
#include "cpu_test_util.h"

namespace remat {
namespace {

namespace fs = std::filesystem;

struct StoreDir {
  fs::path p = fs::temp_directory_path() /
               ("remat-comm-" + std::to_string(getpid()) + "-" +
                std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  StoreDir() { fs::create_directories(p); }
  ~StoreDir() {
    std::error_code ec;
    fs::remove_all(p, ec);
  }
};

// Runs `body(comm)` on `world` ranks, one thread each; rethrows the first failure.
void on_ranks(int world, const std::function<void(Communicator&)>& body, int timeout_ms = 20000) {
  StoreDir store;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        GlooOptions o;
        o.rank = r;
        o.size = world;
        o.store_dir = store.p.string();
        o.timeout = std::chrono::milliseconds(timeout_ms);
        GlooCommunicator c(o);
        body(c);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
}

void collectives_on(int world) {
  const std::size_t shard = 5;
  on_ranks(world, [&](Communicator& c) {
    const int r = c.rank();
    ASSERT_EQ(c.size(), world);
    // all_reduce: small integers in fp32 sum exactly in any order.
    std::vector<float> v(7);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((r + 1) * 10 + static_cast<int>(i));
    c.all_reduce_sum(v.data(), v.size(), "v");
    for (std::size_t i = 0; i < v.size(); ++i)
      EXPECT_EQ(v[i], 5.0f * static_cast<float>(world * (world + 1)) + static_cast<float>(world) * static_cast<float>(i));
    double d = 0.25 * (r + 1);
    c.all_reduce_sum(&d, 1, "d");
    EXPECT_EQ(d, 0.125 * world * (world + 1));
    // reduce_scatter: this rank's shard is the sum of every rank's copy of it.
    std::vector<float> rs(shard * world);
    for (std::size_t i = 0; i < rs.size(); ++i) rs[i] = static_cast<float>(i) + static_cast<float>(r);
    c.reduce_scatter_sum(rs.data(), shard, "rs");
    for (std::size_t i = 0; i < shard; ++i) {
      const std::size_t k = static_cast<std::size_t>(r) * shard + i;
      EXPECT_EQ(rs[k], static_cast<float>(world) * static_cast<float>(k) + static_cast<float>(world * (world - 1) / 2))
          << "element " << k;
    }
    // all_gather: every shard from its owner.
    std::vector<float> ag(shard * world, -1.0f);
    for (std::size_t i = 0; i < shard; ++i) ag[static_cast<std::size_t>(r) * shard + i] = static_cast<float>(100 * r + static_cast<int>(i));
    c.all_gather(ag.data(), shard, "ag");
    for (int o = 0; o < world; ++o)
      for (std::size_t i = 0; i < shard; ++i)
        EXPECT_EQ(ag[static_cast<std::size_t>(o) * shard + i], static_cast<float>(100 * o + static_cast<int>(i)));
    // broadcast from rank 1.
    std::vector<float> b(4, static_cast<float>(r));
    c.broadcast(b.data(), b.size(), 1, "b");
    for (float x : b) EXPECT_EQ(x, 1.0f);
    c.barrier("end");
    ASSERT_EQ(c.records().size(), 6u);
    EXPECT_EQ(c.records()[0].kind, CommKind::AllReduce);
    EXPECT_EQ(c.records()[0].bytes, 7u * 4u);
    EXPECT_EQ(c.records()[2].kind, CommKind::ReduceScatter);
    EXPECT_EQ(c.records()[2].bytes, shard * world * 4u);
    EXPECT_EQ(c.records()[3].bytes, shard * world * 4u);
    EXPECT_EQ(c.records()[5].kind, CommKind::Barrier);
    EXPECT_EQ(c.records()[0].ranks, world);
    EXPECT_EQ(c.bytes_recorded(), 7u * 4u + 8u + 2u * shard * world * 4u + 16u);
  });
}

TEST(Communicator, GlooCollectivesOnThreeRanks) { collectives_on(3); }
TEST(Communicator, GlooCollectivesOnFourRanks) { collectives_on(4); }

TEST(Communicator, NullCountsAndMovesNothing) {
  NullCommunicator c(1, 4);
  EXPECT_FALSE(c.moves_data());
  std::vector<float> v = {1.0f, 2.0f};
  c.all_reduce_sum(v.data(), v.size(), "grads");
  c.all_gather(static_cast<float*>(nullptr), 3, "params");  // no buffer is touched: the simulator passes none
  EXPECT_EQ(v, (std::vector<float>{1.0f, 2.0f}));
  ASSERT_EQ(c.records().size(), 2u);
  EXPECT_EQ(c.records()[1].bytes, 3u * 4u * 4u);
  EXPECT_THROW(NullCommunicator(4, 4), Error);
  EXPECT_THROW(c.broadcast(v.data(), 2, 4, "x"), Error);
}

TEST(Communicator, RendezvousWithoutThePeerTimesOut) {
  StoreDir store;
  GlooOptions o;
  o.rank = 0;
  o.size = 2;
  o.store_dir = store.p.string();
  o.timeout = std::chrono::milliseconds(300);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    GlooCommunicator c(o);
    FAIL() << "connected without rank 1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 of 2"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

// More ranks than this machine has cores: the timeout also says they may not all have started.
TEST(Communicator, RendezvousOfMoreRanksThanCoresSaysTheyMayNotHaveStarted) {
  StoreDir store;
  GlooOptions o;
  o.rank = 0;
  o.size = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) + 1;
  o.store_dir = store.p.string();
  o.timeout = std::chrono::milliseconds(300);
  try {
    GlooCommunicator c(o);
    FAIL() << "connected without its peers";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("share this machine's " + std::to_string(o.size - 1) + " cores"), std::string::npos) << m;
    EXPECT_NE(m.find("longer --dist-timeout"), std::string::npos) << m;
  }
  if (std::thread::hardware_concurrency() < 2) return;
  o.size = 2;  // two ranks on two cores or more: no such guess
  try {
    GlooCommunicator c(o);
    FAIL() << "connected without rank 1";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("share this machine"), std::string::npos) << e.what();
  }
}

// CUDA ranks' communicator, from librematnccl.so: where the build has NCCL the library loads and
// its entry point reaches NcclCommunicator, whose rendezvous refuses a missing store directory
// before any CUDA call (so no GPU is needed); elsewhere the reason names the library.
TEST(NcclLoader, ReachesTheCommunicatorOrSaysWhyNot) {
  std::string why;
  NcclSpec s;
  s.rank = 1;
  s.size = 2;
  s.store_dir = (fs::temp_directory_path() / ("remat-no-such-store-" + std::to_string(getpid()))).string();
  s.key = "k";
  std::string e;
  try {
    make_nccl_communicator(s);
  } catch (const Error& x) {
    e = x.what();
  }
  if (!nccl_available(&why)) {
    EXPECT_NE(why.find("librematnccl.so"), std::string::npos) << why;
    EXPECT_EQ(nccl_version(), "");
    EXPECT_NE(e.find("CUDA ranks need NCCL"), std::string::npos) << e;
    return;
  }
  EXPECT_EQ(why, "");
  const std::string v = nccl_version();
  EXPECT_EQ(std::count(v.begin(), v.end(), '.'), 2) << v;
  EXPECT_NE(e.find("rank 1 of 2"), std::string::npos) << e;
  EXPECT_NE(e.find("'" + s.store_dir + "' does not exist"), std::string::npos) << e;
}

// A replica's dropout mask is its slice of the global batch's mask.
TEST(DataParallel, DropoutMaskOfAReplicaIsItsSliceOfTheGlobalMask) {
  cputest::Env e;
  ModelConfig m;
  m.batch = 2;
  m.seq = 3;
  m.hidden = 5;
  m.heads = 1;
  const int world = 3;
  for (DropoutSite site : {kSiteAttentionResidual, kSiteAttentionProbs}) {
    ModelConfig g = m;
    g.batch = m.batch * world;
    const auto n = static_cast<std::int64_t>(dropout_mask_elements(m, site));
    EXPECT_EQ(dropout_mask_elements(g, site), static_cast<std::uint64_t>(n * world));
    DropoutKey key{7, 2, 1, site};
    Tensor whole = e.make(DType::U8, n * world);
    e.be.dropout_mask(whole, key, 0.4f, n * world);
    const auto all = e.get(whole);
    for (int r = 0; r < world; ++r) {
      DropoutKey k = key;
      k.offset = dropout_offset(m, site, r);
      Tensor part = e.make(DType::U8, n);
      e.be.dropout_mask(part, k, 0.4f, n);
      const auto mine = e.get(part);
      for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(mine[i], all[r * n + i]) << "site " << site << " rank " << r << " element " << i;
    }
  }
}

}  // namespace
}  // namespace remat
