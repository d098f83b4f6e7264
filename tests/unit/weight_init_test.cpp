// The initial weights do not depend on the thread count or on how the work is split: the
// parallel initialization gives the bits of the one-value-at-a-time reference
// (reference_weight_values, the original serial definition).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/engine/executor.h"
#include "core/engine/model_state.h"
#include "core/engine/weight_init.h"
#include "core/schedule/schedule.h"
#include "core/trace/summary.h"
#include "core/util/bf16.h"
#include "core/util/error.h"
#include "core/util/hash.h"
#include "engine_test_util.h"

namespace remat {
namespace {

std::uint64_t bits_hash(const std::vector<float>& v) {
  Fnv1a64 h;
  h.update(reinterpret_cast<const unsigned char*>(v.data()), v.size() * sizeof(float));
  return h.value();
}

// Large enough that the embedding is split into many pieces of work (an odd vocabulary).
ModelConfig wide_vocab_model(Family arch, DType dtype) {
  ModelConfig m = testing::small_model(arch, AttentionImpl::Naive, 0.0, dtype);
  m.vocab = 50257;
  return m;
}

TEST(WeightInit, ParallelValuesEqualTheSerialReferenceAtEveryThreadCount) {
  for (Family arch : {Family::Gpt2, Family::Llama}) {
    ModelConfig m = wide_vocab_model(arch, DType::F32);
    ParamLayout layout(m);
    const std::vector<float> ref = reference_weight_values(layout, m.layers, 1234);
    const std::uint64_t ref_hash = bits_hash(ref);
    for (int threads : {1, 2, 3, 7}) {
      std::vector<float> got(ref.size(), -7.0f);
      init_weight_values(layout, m.layers, 1234, got.data(), threads);
      EXPECT_EQ(bits_hash(got), ref_hash) << "threads " << threads;
      ASSERT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)), 0)
          << "threads " << threads;
    }
    // A different seed gives different weights.
    std::vector<float> other(ref.size());
    init_weight_values(layout, m.layers, 1235, other.data(), 2);
    EXPECT_NE(bits_hash(other), ref_hash);
  }
}

TEST(WeightInit, ModelStateHoldsTheReferenceWeightsAndTheirRounding) {
  for (DType dt : {DType::F32, DType::BF16}) {
    ModelConfig m = wide_vocab_model(Family::Gpt2, dt);
    const std::vector<float> ref = reference_weight_values(ParamLayout(m), m.layers, 99);
    for (int threads : {1, 2, 3}) {
      CpuBackend be(threads);
      LogicalClock clock;
      TrackingAllocator alloc(be.memory(Space::Device), be.memory(Space::Host), clock);
      ModelState s(m, be, alloc);
      s.init_weights(99);
      const std::vector<float> master = s.read_params();
      ASSERT_EQ(master.size(), ref.size());
      EXPECT_EQ(std::memcmp(master.data(), ref.data(), ref.size() * sizeof(float)), 0)
          << to_string(dt) << " threads " << threads;
      std::vector<float> params;
      be.read(s.params, params);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < ref.size(); ++i) {
        const float want = dt == DType::BF16 ? bf16_to_float(float_to_bf16(ref[i])) : ref[i];
        wrong += std::memcmp(&params[i], &want, sizeof(float)) != 0;
      }
      EXPECT_EQ(wrong, 0u) << to_string(dt) << " threads " << threads;
    }
  }
}

TEST(WeightInit, AnyRangeOfAParameterEqualsTheSameRangeOfTheWhole) {
  const DropoutKey key = weight_init_key(7, 3);
  for (std::int64_t numel : {1, 2, 3, 5, 13, 64, 1001}) {
    std::vector<float> whole(static_cast<std::size_t>(numel));
    normal_values(key, 0.5f, numel, 0, numel, whole.data());
    for (std::int64_t b = 0; b < numel; b += 4) {
      for (std::int64_t e : {std::min(numel, b + 4), std::min(numel, b + 8), numel}) {
        std::vector<float> part(static_cast<std::size_t>(e - b));
        normal_values(key, 0.5f, numel, b, e, part.data());
        ASSERT_EQ(std::memcmp(part.data(), whole.data() + b, part.size() * sizeof(float)), 0)
            << "numel " << numel << " [" << b << ", " << e << ")";
      }
    }
    double sum = 0.0;
    for (float x : whole) sum += std::fabs(x);
    EXPECT_GT(sum, 0.0) << numel;
  }
}

// Runs at any start and end (off the four-value grid, odd lengths, whole vectors), scattered to
// other places, give the whole initialization's values at the elements they name.
TEST(WeightInit, RunsAnywhereGiveTheWholeInitsValues) {
  ModelConfig m = testing::small_model(Family::Gpt2, AttentionImpl::Naive, 0.0, DType::F32);
  const ParamLayout L(m);
  std::vector<float> whole(static_cast<std::size_t>(L.total()));
  init_weight_values(L, m.layers, 5, whole.data(), 2);
  std::vector<WeightRun> runs;
  std::int64_t dst = 0;
  for (std::size_t i = 0; i < L.params().size(); ++i) {
    const std::int64_t n = L.params()[i].numel();
    for (std::int64_t b : {std::int64_t{0}, std::int64_t{1}, std::int64_t{3}, n / 2 + 1, n - 3}) {
      for (std::int64_t len : {1, 2, 5, 7, 70001}) {
        if (b < 0 || b >= n) continue;
        const std::int64_t e = std::min(n, b + len);
        runs.push_back({i, b, e, dst});
        dst += e - b;
      }
    }
    runs.push_back({i, 0, n, dst});
    dst += n;
  }
  for (int threads : {1, 3}) {
    std::vector<float> got(static_cast<std::size_t>(dst), -7.0f);
    init_weight_runs(L, m.layers, 5, runs, got.data(), threads);
    std::size_t wrong = 0;
    for (const WeightRun& r : runs)
      wrong += std::memcmp(got.data() + r.dst, whole.data() + L.params()[r.param].offset + r.begin,
                           static_cast<std::size_t>(r.end - r.begin) * sizeof(float)) != 0;
    EXPECT_EQ(wrong, 0u) << "of " << runs.size() << " runs, threads " << threads;
  }
  std::vector<float> out(8);
  EXPECT_THROW(init_weight_runs(L, m.layers, 5, {{0, 0, L.params()[0].numel() + 1, 0}}, out.data(), 1),
               Error);
  EXPECT_THROW(init_weight_runs(L, m.layers, 5, {{L.params().size(), 0, 1, 0}}, out.data(), 1), Error);
}

TEST(WeightInit, AShardOfTheLayoutsRunsGivesTheSameSliceOfTheWhole) {
  ModelConfig m = testing::small_model(Family::Gpt2, AttentionImpl::Naive, 0.0, DType::F32);
  const ParamLayout L(m);
  std::vector<float> whole(static_cast<std::size_t>(L.total()));
  init_weight_values(L, m.layers, 5, whole.data(), 2);
  const std::vector<WeightRun> all = layout_weight_runs(L);
  for (int ranks : {2, 3, 7}) {
    const std::int64_t c = (L.total() + ranks - 1) / ranks;
    for (int r = 0; r < ranks; ++r) {
      const std::int64_t lo = r * c, n = std::min(L.total(), lo + c) - lo;
      const std::vector<WeightRun> mine = runs_within(all, lo, n);
      std::int64_t covered = 0;
      for (const WeightRun& w : mine) covered += w.end - w.begin;
      EXPECT_EQ(covered, n) << "rank " << r << " of " << ranks;
      std::vector<float> got(static_cast<std::size_t>(n), -7.0f);
      init_weight_runs(L, m.layers, 5, mine, got.data(), 2);
      EXPECT_EQ(std::memcmp(got.data(), whole.data() + lo, static_cast<std::size_t>(n) * sizeof(float)), 0)
          << "rank " << r << " of " << ranks;
    }
  }
}

// A norm starts at its identity: weight 1, or 0 where it scales by 1 + w (Gemma, as Hugging Face
// starts it; it started at 1, a gain of 2). So the first step of Gemma equals, to the bit, that
// of the same model whose norms scale by w starting at 1.
TEST(WeightInit, NormsStartAtTheirIdentityUnderAUnitOffsetToo) {
  ModelConfig g = testing::small_model(Family::Gemma, AttentionImpl::Naive, 0.0, DType::F32);
  ModelConfig plain = g;
  plain.norm_unit_offset = false;
  for (const ModelConfig* m : {&g, &plain}) {
    const ParamLayout L(*m);
    std::vector<float> v(static_cast<std::size_t>(L.total()));
    init_weight_values(L, m->layers, 3, v.data(), 1);
    int norms = 0;
    for (const ParamSpec& p : L.params()) {
      if (p.cols != 1 || p.name.back() != 'w') continue;  // a norm's weight ("ln1.w"), not a bias
      ++norms;
      for (std::int64_t i = 0; i < p.numel(); ++i)
        ASSERT_EQ(v[static_cast<std::size_t>(p.offset + i)], m->norm_unit_offset ? 0.0f : 1.0f) << p.name;
    }
    EXPECT_EQ(norms, 2 * m->layers + 1);  // two per block and the final norm
  }
  Schedule s = store_all_schedule(g.layers);
  s.policy = "none";
  const Trace a = testing::train(g, s, 1, 7), b = testing::train(plain, s, 1, 7);
  ASSERT_EQ(a.losses().size(), 1u);
  EXPECT_EQ(a.losses()[0], b.losses()[0]);
}

TEST(WeightInit, RangesOffTheFourValueGridAreRefused) {
  std::vector<float> out(16);
  const DropoutKey key = weight_init_key(1, 0);
  EXPECT_THROW(normal_values(key, 0.02f, 16, 2, 8, out.data()), Error);
  EXPECT_THROW(normal_values(key, 0.02f, 16, 0, 6, out.data()), Error);
  EXPECT_THROW(normal_values(key, 0.02f, 16, 0, 17, out.data()), Error);
  EXPECT_NO_THROW(normal_values(key, 0.02f, 15, 12, 15, out.data()));
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

TEST(StartUp, ARunRecordsTheTimeBeforeItsFirstStepAndTheSummaryCarriesIt) {
  ModelConfig m = testing::small_model(Family::Gpt2, AttentionImpl::Naive, 0.0);
  Trace t = testing::train(m, store_all_schedule(m.layers), 1, 3);
  ASSERT_TRUE(t.complete) << t.error;
  EXPECT_GT(t.startup_ms, 0.0);
  ASSERT_FALSE(t.step_stats.empty());
  const nlohmann::json j = summary_json(t);
  ASSERT_TRUE(j.contains("startup_ms"));
  EXPECT_DOUBLE_EQ(j["startup_ms"].get<double>(), t.startup_ms);
  Trace unknown;
  EXPECT_FALSE(summary_json(unknown).contains("startup_ms"));
}

// A model's first steps with its moments left unwritten (as ModelState leaves them: here poisoned
// with NaN, and the gradients too) give the bits of the same steps on zero-filled moments and
// gradients: parameters, gradients and moments after each of three steps, fp32 and bf16.
TEST(StartUp, UnwrittenMomentsAndGradientsGiveTheZeroFilledBits) {
  for (DType dt : {DType::F32, DType::BF16}) {
    const ModelConfig m = testing::small_model(Family::Gpt2, AttentionImpl::Naive, 0.1, dt);
    std::vector<std::int32_t> tok(static_cast<std::size_t>(m.tokens())), tgt(tok.size());
    for (std::size_t i = 0; i < tok.size(); ++i)
      tok[i] = static_cast<std::int32_t>((i * 37) % 256), tgt[i] = static_cast<std::int32_t>((i * 11 + 3) % 256);
    std::vector<std::vector<std::uint8_t>> got[2];
    for (int filled = 0; filled < 2; ++filled) {
      CpuBackend be(2);
      LogicalClock clock;
      TrackingAllocator alloc(be.memory(Space::Device), be.memory(Space::Host), clock);
      ModelState st(m, be, alloc);
      EXPECT_TRUE(st.moments_zero);
      st.init_weights(3);
      for (const Tensor* t : {&st.m, &st.v, &st.grads}) {
        std::vector<std::uint8_t> junk(t->bytes(), 0xFF);
        be.write_bytes(*t, junk.data());
      }
      if (filled) {
        for (const Tensor* t : {&st.m, &st.v, &st.grads}) be.fill_zero(*t);
        st.moments_zero = false;
      }
      Executor ex(st, be, alloc, nullptr, ExecOptions{});
      for (int step = 0; step < 3; ++step) {
        ex.run_step(store_all_schedule(m.layers), step, tok, tgt);
        EXPECT_FALSE(st.moments_zero);
        for (const Tensor* t : {&st.params, &st.grads, &st.m, &st.v}) {
          std::vector<std::uint8_t> b(t->bytes());
          be.read_bytes(*t, b.data());
          got[filled].push_back(std::move(b));
        }
      }
    }
    ASSERT_EQ(got[0].size(), got[1].size());
    for (std::size_t i = 0; i < got[0].size(); ++i)
      EXPECT_TRUE(got[0][i] == got[1][i]) << to_string(dt) << ": step " << i / 4 << ", tensor " << i % 4
                                          << " (params, grads, m, v) differs";
  }
}

}  // namespace
}  // namespace remat
