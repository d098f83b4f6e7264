// The variable-count collectives ZeRO's buckets use (communicator.h), through Gloo between
// ranks on threads of this process, including a rank that owns none of the bucket.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>
#include <unistd.h>

#include "core/dist/gloo_communicator.h"
#include "core/util/error.h"

namespace remat {
namespace {

namespace fs = std::filesystem;

void on_ranks(int world, const std::function<void(Communicator&)>& body) {
  const fs::path store = fs::temp_directory_path() /
                         ("remat-zero-comm-" + std::to_string(getpid()) + "-" +
                          std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  fs::create_directories(store);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        GlooOptions o;
        o.rank = r;
        o.size = world;
        o.store_dir = store.string();
        o.timeout = std::chrono::milliseconds(20000);
        GlooCommunicator c(o);
        body(c);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  std::error_code ec;
  fs::remove_all(store, ec);
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
}

TEST(ZeroCollectives, VariableCountsOverGlooWithAnEmptyPart) {
  const std::vector<std::size_t> counts = {3, 0, 2};  // rank 1 owns none
  on_ranks(3, [&](Communicator& c) {
    const int r = c.rank();
    const std::size_t first[] = {0, 3, 3};
    // all_gather_v: each part from its owner, the others' stale values replaced.
    std::vector<float> g(5, -1.0f);
    for (std::size_t i = 0; i < counts[static_cast<std::size_t>(r)]; ++i)
      g[first[r] + i] = static_cast<float>(10 * r + static_cast<int>(i));
    c.all_gather_v(g.data(), counts, "g");
    EXPECT_EQ(g, (std::vector<float>{0, 1, 2, 20, 21})) << "rank " << r;
    // reduce_scatter_sum_v: this rank's part summed over the ranks (small integers: exact).
    std::vector<float> s(5);
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<float>(i + 1) * static_cast<float>(r + 1);
    c.reduce_scatter_sum_v(s.data(), counts, "s");
    for (std::size_t i = 0; i < counts[static_cast<std::size_t>(r)]; ++i)
      EXPECT_EQ(s[first[r] + i], 6.0f * static_cast<float>(first[r] + i + 1)) << "rank " << r;
    ASSERT_EQ(c.records().size(), 2u);
    EXPECT_EQ(c.records()[0].kind, CommKind::AllGather);
    EXPECT_EQ(c.records()[1].kind, CommKind::ReduceScatter);
    EXPECT_EQ(c.bytes_recorded(), 2u * 5u * 4u);
    EXPECT_THROW(c.all_gather_v(g.data(), {5}, "wrong"), Error);  // one count for three ranks
  });
}

TEST(ZeroCollectives, SixteenBitGathersMoveTheBitsAndCountTwoBytes) {
  // bf16 parameters and activations are gathered as their bits: odd counts, odd offsets, and
  // values no float would hold in 16 bits.
  const std::vector<std::size_t> counts = {3, 1, 0};
  on_ranks(3, [&](Communicator& c) {
    const int r = c.rank();
    const std::size_t first[] = {0, 3, 4};
    std::vector<std::uint16_t> g(4, 0xffffu);
    for (std::size_t i = 0; i < counts[static_cast<std::size_t>(r)]; ++i)
      g[first[r] + i] = static_cast<std::uint16_t>(0x7f80u + 0x1001u * static_cast<unsigned>(r) + i);
    c.all_gather_v(g.data(), counts, "g16");
    EXPECT_EQ(g, (std::vector<std::uint16_t>{0x7f80, 0x7f81, 0x7f82, 0x8f81})) << "rank " << r;
    std::vector<std::uint16_t> f(6, 0);
    for (int i = 0; i < 2; ++i) f[static_cast<std::size_t>(2 * r + i)] = static_cast<std::uint16_t>(100 * r + i + 1);
    c.all_gather(f.data(), 2, "f16");
    EXPECT_EQ(f, (std::vector<std::uint16_t>{1, 2, 101, 102, 201, 202})) << "rank " << r;
    EXPECT_EQ(c.bytes_recorded(), 2u * (4u + 6u));
  });
}

TEST(ZeroCollectives, NullCountsTheBucketAndMovesNothing) {
  NullCommunicator c(1, 2);
  std::vector<float> v = {1, 2, 3};
  c.all_gather_v(v.data(), {2, 1}, "g");
  c.reduce_scatter_sum_v(v.data(), {1, 2}, "s");
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(c.bytes_recorded(), 24u);
  std::vector<std::uint16_t> h = {1, 2, 3};
  c.all_gather_v(h.data(), {2, 1}, "g16");
  EXPECT_EQ(h, (std::vector<std::uint16_t>{1, 2, 3}));
  EXPECT_EQ(c.bytes_recorded(), 24u + 6u);
}

}  // namespace
}  // namespace remat
