// A tensor-parallel rank's weights are slices of the single-process initialization, cut as
// Megatron cuts them, and its dropout masks are the single-process masks at its positions.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/engine/tensor_parallel.h"
#include "core/engine/weight_init.h"
#include "core/graph/parallel_layout.h"
#include "core/model/param_layout.h"
#include "core/util/error.h"
#include "core/util/philox.h"
#include "policy_test_util.h"

namespace remat {
namespace {

// Llama-style: 4 heads, 2 kv-heads, SwiGLU, in fp32.
ModelConfig gqa_model() {
  ModelConfig m = test::tiny(Family::Llama, AttentionImpl::Naive, 2);
  m.dtype = DType::F32;
  return m;
}

std::vector<float> init(const ModelConfig& m) {
  const ParamLayout L(m);
  std::vector<float> v(static_cast<std::size_t>(L.total()));
  init_weight_values(L, m.layers, 11, v.data(), 1);
  return v;
}

// Element (row, col) of block b's parameter `param` (its name in the block), in a layout's buffer.
float at(const ParamLayout& L, const std::vector<float>& v, int b, const std::string& param, std::int64_t row,
         std::int64_t col) {
  for (const ParamSpec& p : L.params())
    if (p.block == b && p.offset == L.offset(b, param)) return v[static_cast<std::size_t>(p.offset + row * p.cols + col)];
  ADD_FAILURE()  << "no parameter " << param << " in block " << b;
  return 0;
}

TEST(TensorParallel, RankWeightsAreSlicesOfTheWholeInit) {
  const ModelConfig m = gqa_model();
  const int T = 2;
  const std::vector<float> global = init(m);
  const ParamLayout G(m), R(tensor_rank_model(m, T));
  const std::int64_t h = m.hidden, q = m.q_width(), kv = m.kv_width(), f = m.ffn;
  for (int t = 0; t < T; ++t) {
    const std::vector<float> mine = rank_weight_slices(m, T, t, global);
    ASSERT_EQ(static_cast<std::int64_t>(mine.size()), R.total());
    for (int b = 0; b < m.layers; ++b) {
      // q|k|v: rank t holds q rows [t q/T, (t+1) q/T), then its k rows, then its v rows.
      for (std::int64_t c = 0; c < h; c += 7) {
        for (std::int64_t r = 0; r < q / T; ++r)
          EXPECT_EQ(at(R, mine, b, "attn.qkv.w", r, c), at(G, global, b, "attn.qkv.w", t * q / T + r, c));
        for (std::int64_t r = 0; r < kv / T; ++r) {
          EXPECT_EQ(at(R, mine, b, "attn.qkv.w", q / T + r, c),
                    at(G, global, b, "attn.qkv.w", q + t * kv / T + r, c));
          EXPECT_EQ(at(R, mine, b, "attn.qkv.w", q / T + kv / T + r, c),
                    at(G, global, b, "attn.qkv.w", q + kv + t * kv / T + r, c));
        }
        // gate|up: rows [t f/T, (t+1) f/T) of each.
        for (std::int64_t r = 0; r < f / T; ++r) {
          EXPECT_EQ(at(R, mine, b, "mlp.fc.w", r, c), at(G, global, b, "mlp.fc.w", t * f / T + r, c));
          EXPECT_EQ(at(R, mine, b, "mlp.fc.w", f / T + r, c),
                    at(G, global, b, "mlp.fc.w", f + t * f / T + r, c));
        }
      }
      // Row-parallel: the input columns [t k/T, (t+1) k/T).
      for (std::int64_t r = 0; r < h; r += 5) {
        for (std::int64_t c = 0; c < q / T; ++c)
          EXPECT_EQ(at(R, mine, b, "attn.proj.w", r, c), at(G, global, b, "attn.proj.w", r, t * q / T + c));
        for (std::int64_t c = 0; c < f / T; ++c)
          EXPECT_EQ(at(R, mine, b, "mlp.fc2.w", r, c), at(G, global, b, "mlp.fc2.w", r, t * f / T + c));
      }
      // Norms whole.
      for (std::int64_t r = 0; r < h; ++r)
        EXPECT_EQ(at(R, mine, b, "ln1.w", r, 0), at(G, global, b, "ln1.w", r, 0));
    }
    // The embedding whole, at the same place.
    for (std::int64_t i = 0; i < m.vocab * h; i += 13)
      EXPECT_EQ(mine[static_cast<std::size_t>(R.wte + i)], global[static_cast<std::size_t>(G.wte + i)]);
  }
  // Slices of two ranks differ (a rank does not hold the same part twice).
  EXPECT_NE(rank_weight_slices(m, T, 0, global), rank_weight_slices(m, T, 1, global));
}

// A rank draws only its own slices: the bits of the whole init's slices, for fused q|k|v and
// gate|up, biases, and head and MLP widths whose slices start off the four-value grid.
TEST(TensorParallel, RanksDrawOnlyTheirSlicesWithTheWholeInitsBits) {
  ModelConfig odd = test::tiny(Family::Gpt2, AttentionImpl::Naive, 2);
  odd.dtype = DType::F32;
  odd.hidden = 36, odd.heads = 6, odd.kv_heads = 6, odd.ffn = 90;  // slices of 18, 45, 12, 30
  for (const ModelConfig& m : {gqa_model(), test::tiny(Family::Gpt2, AttentionImpl::Naive, 2), odd}) {
    const ParamLayout G(m);
    for (int T : {2, 3, 4}) {
      if (m.heads % T != 0 || m.kv_heads % T != 0 || m.ffn % T != 0) continue;
      std::vector<float> global(static_cast<std::size_t>(G.total()));
      init_weight_values(G, m.layers, 11, global.data(), 2);
      for (int t = 0; t < T; ++t)
        for (int threads : {1, 3}) {
          const std::vector<float> drawn = rank_weight_values(m, T, t, 11, threads);
          const std::vector<float> cut = rank_weight_slices(m, T, t, global);
          ASSERT_EQ(drawn.size(), cut.size());
          EXPECT_EQ(std::memcmp(drawn.data(), cut.data(), cut.size() * sizeof(float)), 0)
              << "hidden " << m.hidden << " T " << T << " rank " << t << " threads " << threads;
        }
    }
  }
}

TEST(TensorParallel, RefusesWeightsOfAnotherModel) {
  const ModelConfig m = gqa_model();
  std::vector<float> wrong(10, 0.f);
  EXPECT_THROW(rank_weight_slices(m, 2, 0, wrong), Error);
}

TEST(TensorParallel, AttentionMaskIsTheRanksHeadsOfEachBatchRow) {
  ModelConfig m = gqa_model();
  const int T = 2;
  const std::uint64_t S = static_cast<std::uint64_t>(m.seq), a = static_cast<std::uint64_t>(m.heads);
  DropoutKey whole{7, 1, 0, kSiteAttentionProbs, 0};
  for (int t = 0; t < T; ++t) {
    const DropoutKey k = tp_dropout_key(whole, m, kSiteAttentionProbs, T, t, false);
    // The rank's mask is [B, a/T, S, S]; its element (b, hl, i, j) is the whole mask's
    // (b, t a/T + hl, i, j) of [B, a, S, S].
    std::uint64_t idx = 0;
    for (std::uint64_t b = 0; b < static_cast<std::uint64_t>(m.batch); ++b)
      for (std::uint64_t hl = 0; hl < a / T; ++hl)
        for (std::uint64_t e = 0; e < S * S; ++e, ++idx) {
          const std::uint64_t g = (b * a + t * (a / T) + hl) * S * S + e;
          ASSERT_EQ(philox_bits(k, idx), philox_bits(whole, g)) << "rank " << t << " element " << idx;
        }
  }
}

TEST(TensorParallel, SequenceParallelResidualMaskIsTheRanksRows) {
  ModelConfig m = gqa_model();
  const int T = 2;
  const std::uint64_t n = static_cast<std::uint64_t>(m.tokens() * m.hidden);
  const DropoutKey whole{7, 0, 1, kSiteMlpResidual, 0};
  for (int t = 0; t < T; ++t) {
    const DropoutKey k = tp_dropout_key(whole, m, kSiteMlpResidual, T, t, true);
    for (std::uint64_t i = 0; i < n / T; i += 3) EXPECT_EQ(philox_bits(k, i), philox_bits(whole, t * (n / T) + i));
    // Without sp every rank holds all rows: the whole mask.
    const DropoutKey full = tp_dropout_key(whole, m, kSiteMlpResidual, T, t, false);
    for (std::uint64_t i = 0; i < n; i += 5) EXPECT_EQ(philox_bits(full, i), philox_bits(whole, i));
  }
}

}  // namespace
}  // namespace remat
