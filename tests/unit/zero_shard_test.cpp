// ZeRO's shard arithmetic (zero_shard.h) and what the simulator's walk allocates under each
// stage: the sharded static buffers, the gathered parameters and the gradient buckets.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/backend/null/null_backend.h"
#include "core/dist/communicator.h"
#include "core/engine/executor.h"
#include "core/engine/model_state.h"
#include "core/engine/rank_prediction.h"
#include "core/engine/simulator.h"
#include "core/engine/zero_shard.h"
#include "core/util/error.h"
#include "policy_test_util.h"

namespace remat {
namespace {

using i64 = std::int64_t;

TEST(ZeroShard, CeilShardsTheLastShorter) {
  const ZeroShard z = make_zero_shard(2, 4, 0, 10);
  EXPECT_EQ(z.shard(), 3);
  const i64 begins[] = {0, 3, 6, 9}, counts[] = {3, 3, 3, 1};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(z.begin(r), begins[r]) << r;
    EXPECT_EQ(z.count(r), counts[r]) << r;
  }
  // Fewer elements than ranks: the last ranks own none.
  const ZeroShard few = make_zero_shard(1, 4, 3, 2);
  EXPECT_EQ(few.shard(), 1);
  EXPECT_EQ(few.count(1), 1);
  EXPECT_EQ(few.count(2), 0);
  EXPECT_EQ(few.count(), 0);
  EXPECT_EQ(few.begin(), 2);
}

TEST(ZeroShard, StagesShardWhatTheyName) {
  for (int s = 0; s <= 3; ++s) {
    const ZeroShard z = make_zero_shard(s, 2, 1, 8);
    EXPECT_EQ(z.optimizer(), s >= 1);
    EXPECT_EQ(z.gradients(), s >= 2);
    EXPECT_EQ(z.parameters(), s >= 3);
  }
  EXPECT_FALSE(make_zero_shard(3, 1, 0, 8).parameters());  // one rank shards nothing
  EXPECT_THROW(make_zero_shard(4, 2, 0, 8), ConfigError);
  EXPECT_THROW(make_zero_shard(1, 2, 2, 8), ConfigError);
  EXPECT_THROW(make_zero_shard(1, 0, 0, 8), ConfigError);
}

TEST(ZeroBucket, MergesRangesAndSplitsThemByRank) {
  const ZeroBucket b({{5, 3}, {0, 2}, {8, 2}, {3, 0}});
  ASSERT_EQ(b.ranges().size(), 2u);  // [0, 2) and [5, 10)
  EXPECT_EQ(b.ranges()[1], (std::pair<i64, i64>{5, 5}));
  EXPECT_EQ(b.numel(), 7);
  EXPECT_EQ(b.position(6, 2), 3);
  EXPECT_EQ(b.position(1, 2), -1);  // runs past [0, 2)
  EXPECT_EQ(b.position(3, 1), -1);
  EXPECT_THROW(ZeroBucket({{0, 4}, {3, 2}}), Error);
  const ZeroShard z = make_zero_shard(2, 3, 1, 12);  // shards [0,4) [4,8) [8,12)
  EXPECT_EQ(b.counts(z), (std::vector<std::size_t>{2, 3, 2}));
  const std::vector<ZeroPiece> p = b.pieces(z);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].bucket, 2);  // element 5 follows [0, 2) in the bucket
  EXPECT_EQ(p[0].shard, 1);   // and is the second of shard [4, 8)
  EXPECT_EQ(p[0].numel, 3);
}

// Every element of the layout is in exactly one bucket, and each rank's pieces of the buckets
// tile its shard: the reduce-scatters fill the gradient shard and the gathers read all of it.
TEST(ZeroBucket, BucketsTileTheLayoutAndTheShards) {
  for (bool tied : {false, true}) {
    ModelConfig m = test::tiny(tied ? Family::Qwen2 : Family::Gpt2, AttentionImpl::Naive);
    const ParamLayout L(m);
    std::vector<ZeroBucket> all;
    for (int b = 0; b < m.layers; ++b) all.push_back(zero_block_bucket(L, b));
    all.push_back(zero_outer_bucket(L));
    for (int D : {2, 3, 4, 7}) {
      std::vector<int> seen(static_cast<std::size_t>(L.total()), 0);
      for (int r = 0; r < D; ++r) {
        const ZeroShard z = make_zero_shard(2, D, r, L.total());
        std::vector<int> mine(static_cast<std::size_t>(z.count()), 0);
        for (const ZeroBucket& b : all) {
          std::size_t sum = 0;
          for (std::size_t c : b.counts(z)) sum += c;
          EXPECT_EQ(static_cast<i64>(sum), b.numel());
          for (const ZeroPiece& p : b.pieces(z))
            for (i64 k = 0; k < p.numel; ++k) ++mine[static_cast<std::size_t>(p.shard + k)];
        }
        EXPECT_TRUE(std::all_of(mine.begin(), mine.end(), [](int c) { return c == 1; }))
            << "D " << D << " rank " << r;
      }
      for (const ZeroBucket& b : all)
        for (const auto& rg : b.ranges())
          for (i64 k = 0; k < rg.second; ++k) ++seen[static_cast<std::size_t>(rg.first + k)];
      EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; })) << "D " << D;
    }
  }
}

// The highest live bytes of one category over the step's events.
std::uint64_t category_high(const BlockGraph& g, const Schedule& s, int zero, int dp, Category c) {
  NullBackend be(nullptr);
  LogicalClock clock;
  TrackingAllocator alloc(be.memory(Space::Device), be.memory(Space::Host), clock);
  ModelState state(g.config(), be, alloc, make_zero_shard(zero, dp, 0, 0));
  NullCommunicator comm(0, dp);
  ExecOptions eo;
  eo.comm = &comm;
  Executor ex(state, be, alloc, nullptr, eo, g);
  std::vector<std::int32_t> tok(static_cast<std::size_t>(g.config().tokens()), 0);
  ex.run_step(s, 0, tok, tok);
  std::int64_t live = 0, high = 0;
  for (const MemoryEvent& e : alloc.events())
    if (e.space == Space::Device && e.category == c) high = std::max(high, live += e.delta);
  return static_cast<std::uint64_t>(high);
}

TEST(ZeroSimulation, StaticBytesAndTransientBuffersPerStage) {
  ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive);
  m.dtype = DType::F32;
  const BlockGraph g(m);
  const ParamLayout L(m);
  const Schedule s = store_all_schedule(m.layers);
  const int D = 4;
  const std::uint64_t c = static_cast<std::uint64_t>(make_zero_shard(1, D, 0, L.total()).shard()) * 4;
  std::uint64_t block_max = 0;
  for (int b = 0; b < m.layers; ++b)
    block_max = std::max(block_max, static_cast<std::uint64_t>(zero_block_bucket(L, b).numel()) * 4);
  const std::uint64_t n = static_cast<std::uint64_t>(L.total()) * 4;
  const std::uint64_t outer = static_cast<std::uint64_t>(zero_outer_bucket(L).numel()) * 4;
  const std::uint64_t embed = static_cast<std::uint64_t>(m.vocab + m.positions) * m.hidden * 4;
  const std::uint64_t head = static_cast<std::uint64_t>(m.vocab + 2) * m.hidden * 4;  // GPT-2: tied wte, ln_f w and b
  for (int z = 0; z <= 3; ++z) {
    ParallelLayout p;
    p.dp = D;
    p.zero = z;
    p.global_batch = m.batch * D;
    const Prediction pr = simulate(g, s, nullptr, 1, false, z, D);
    EXPECT_EQ(pr.static_bytes, rank_static(m, p, 0).total()) << "zero " << z;
    // The parameters: whole, or the shard and one gathered buffer at a time.
    EXPECT_EQ(category_high(g, s, z, D, Category::Parameters),
              z < 3 ? n : c + std::max({block_max, embed, head}))
        << "zero " << z;
    // The gradients: whole, or the shard, the bucket outside the blocks and one block's.
    EXPECT_EQ(category_high(g, s, z, D, Category::Gradients), z < 2 ? n : c + outer + block_max)
        << "zero " << z;
  }
}

}  // namespace
}  // namespace remat
