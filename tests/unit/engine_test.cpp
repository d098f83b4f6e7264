// The engine on the CPU backend: reproducibility, exact activation bytes measured from the
// allocator, the simulator against the measured peak, poisoned frees, learning, refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/engine/simulator.h"
#include "core/graph/block_graph.h"
#include "core/util/error.h"
#include "engine_test_util.h"

namespace remat {
namespace {

using testing::small_model;
using testing::train;

TEST(Engine, SameSeedIsBitwiseIdenticalOtherSeedDiffers) {
  ModelConfig m = small_model(Family::Gpt2, AttentionImpl::Naive, 0.1);
  Schedule s = store_all_schedule(m.layers);
  Trace a = train(m, s, 3, 7), b = train(m, s, 3, 7), c = train(m, s, 3, 8);
  ASSERT_TRUE(a.complete) << a.error;
  EXPECT_EQ(a.losses(), b.losses());
  EXPECT_EQ(a.grad_checksum, b.grad_checksum);
  EXPECT_NE(a.losses(), c.losses());
  EXPECT_NE(a.grad_checksum, c.grad_checksum);
}

TEST(Engine, Gpt2NaiveSavesKorthikantiBytesPerBlockMeasured) {
  for (double p : {0.1, 0.0}) {
    ModelConfig m = small_model(Family::Gpt2, AttentionImpl::Naive, p);
    Trace t = train(m, store_all_schedule(m.layers), 1, 1);
    ASSERT_TRUE(t.complete) << t.error;
    const std::uint64_t s = m.seq, b = m.batch, h = m.hidden, a = m.heads;
    const std::uint64_t expect = p > 0 ? 34 * s * b * h + 5 * a * s * s * b : 32 * s * b * h + 2 * a * s * s * b;
    ASSERT_EQ(t.saved_bytes_per_block.size(), static_cast<std::size_t>(m.layers));
    for (auto v : t.saved_bytes_per_block) EXPECT_EQ(v, expect) << "dropout " << p;
  }
}

TEST(Engine, LlamaGqaSavesItsExactBreakdownMeasured) {
  ModelConfig m = small_model(Family::Llama, AttentionImpl::Naive, 0.1);
  Trace t = train(m, store_all_schedule(m.layers), 1, 1);
  ASSERT_TRUE(t.complete) << t.error;
  const std::uint64_t s = m.seq, b = m.batch, h = m.hidden, a = m.heads, f = m.ffn,
                      kvd = static_cast<std::uint64_t>(m.kv_heads) * m.head_dim();
  // block.in, ln1.out (2sbh each); rotated q|k|v 2sb(h + 2 kv d); probs, drop_out (2as^2b
  // each) and the one-byte drop mask; ctx, ln2.in, ln2.out (2sbh each); two one-byte
  // residual masks; gate|up 4sbf and the SwiGLU output 2sbf.
  const std::uint64_t expect = 2 * s * b * h * 5 + 2 * s * b * (h + 2 * kvd) + 5 * a * s * s * b +
                               2 * s * b * h + 4 * s * b * f + 2 * s * b * f;
  for (auto v : t.saved_bytes_per_block) EXPECT_EQ(v, expect);
}

TEST(Engine, SimulatorPredictsTheMeasuredPeakToTheByte) {
  for (Family arch : {Family::Gpt2, Family::Llama})
    for (AttentionImpl attn : {AttentionImpl::Naive, AttentionImpl::Flash})
      for (DType dt : {DType::BF16, DType::F32}) {
        ModelConfig m = small_model(arch, attn, 0.1, dt);
        Trace t = train(m, store_all_schedule(m.layers), 2, 3, false, 1);
        ASSERT_TRUE(t.complete) << t.error;
        EXPECT_EQ(t.peak_bytes, t.predicted_peak_bytes)
            << to_string(arch) << " " << to_string(attn) << " " << to_string(dt);
        EXPECT_GT(t.peak_bytes, t.static_bytes);
      }
}

TEST(Engine, StaticMemoryIsSixteenBytesPerParameter) {
  for (DType dt : {DType::BF16, DType::F32}) {
    ModelConfig m = small_model(Family::Gpt2, AttentionImpl::Naive, 0.0, dt);
    Prediction p = simulate(m, store_all_schedule(m.layers), nullptr);
    EXPECT_EQ(p.static_bytes, 16u * static_cast<std::uint64_t>(ParamLayout(m).total()));
  }
}

TEST(Engine, PoisonedFreesChangeNothing) {
  // Backward runs after every tensor outside the saved set was freed and filled with NaN
  // bytes: if anything read freed memory, the loss or a gradient would change.
  for (AttentionImpl attn : {AttentionImpl::Naive, AttentionImpl::Flash}) {
    ModelConfig m = small_model(Family::Llama, attn, 0.1);
    Schedule s = store_all_schedule(m.layers);
    Trace clean = train(m, s, 2, 5, false), poisoned = train(m, s, 2, 5, true);
    ASSERT_TRUE(poisoned.complete) << poisoned.error;
    EXPECT_EQ(clean.losses(), poisoned.losses());
    EXPECT_EQ(clean.grad_checksum, poisoned.grad_checksum);
  }
}

TEST(Engine, PoisonFillsFreedMemoryWithNaN) {
  HeapMemory dev, host;
  LogicalClock clock;
  TrackingAllocator a(dev, host, clock);
  a.set_poison(true);
  Tensor t = a.allocate(DType::F32, 16, {Category::SavedActivations, 0, "x"});
  float* p = t.as<float>();
  for (int i = 0; i < 16; ++i) p[i] = 1.0f;
  a.free(t);
  // Quarantined, not returned: still readable, and every byte is 0xFF (a NaN).
  unsigned char bytes[64];
  std::memcpy(bytes, p, sizeof bytes);
  for (unsigned char c : bytes) EXPECT_EQ(c, 0xFF);
  float f;
  std::memcpy(&f, bytes, 4);
  EXPECT_TRUE(std::isnan(f));
  a.release_quarantine();
}

TEST(Engine, TinyLearnsWithinFiftySteps) {
  ModelConfig m;
  set_family(m, Family::Gpt2);
  m.layers = 4;
  m.hidden = 128;
  m.heads = 4;
  m.kv_heads = 4;
  m.ffn = 512;
  m.seq = 64;
  m.positions = 64;
  m.batch = 4;
  m.vocab = 256;
  m.dropout = 0.1;
  Trace t = train(m, store_all_schedule(m.layers), 50, 0);
  ASSERT_TRUE(t.complete) << t.error;
  auto l = t.losses();
  ASSERT_EQ(l.size(), 50u);
  EXPECT_LT(l.back(), 0.75 * l.front()) << "first " << l.front() << " last " << l.back();
}

TEST(Engine, RefusesARunAboveTheMemoryLimitWithPredictedAndAvailable) {
  ModelConfig m = small_model(Family::Gpt2, AttentionImpl::Naive, 0.1);
  Schedule s = store_all_schedule(m.layers);
  std::uint64_t need = simulate(m, s, nullptr).peak_bytes;
  CpuBackend be(2);
  SteadyClock clock;
  RunSpec spec;
  spec.model = m;
  spec.schedule = s;
  spec.memory_limit = need / 2;
  try {
    run_training(spec, be, nullptr, clock);
    FAIL() << "expected a refusal";
  } catch (const OutOfMemoryError& e) {
    EXPECT_GT(e.needed(), spec.memory_limit);
    EXPECT_EQ(e.available(), spec.memory_limit);
    EXPECT_NE(std::string(e.what()).find(std::to_string(e.needed())), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(std::to_string(spec.memory_limit)), std::string::npos);
  }
}

TEST(Engine, CountsWhatRan) {
  ModelConfig m = small_model(Family::Gpt2, AttentionImpl::Flash, 0.0);
  Trace t = train(m, store_all_schedule(m.layers), 1, 0);
  BlockGraph g(m);
  EXPECT_EQ(t.block_forwards, static_cast<std::uint64_t>(m.layers));
  EXPECT_EQ(t.flops.recompute, 0u);
  std::uint64_t head = 2ull * m.tokens() * m.hidden * m.vocab;
  EXPECT_EQ(t.flops.forward, m.layers * g.flops_forward() + head + 9ull * m.tokens() * m.hidden);  // + lnf, embedding
  // The ops table adds up to the same counts.
  std::uint64_t fwd = 0;
  for (const auto& r : t.ops)
    if (r.phase == Phase::Forward) fwd += r.flops;
  EXPECT_EQ(fwd, t.flops.forward + 2 * head);  // the fused head op carries its backward FLOPs
}

}  // namespace
}  // namespace remat
