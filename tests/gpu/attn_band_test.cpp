// The band and tile arithmetic of the CUDA attention kernels (kernels/detail/attn_band.h), run
// on the host: the band is AttnDims's (the CPU backend's mask: windows and chunks), the key tiles a block of queries
// visits and the query tiles a block of keys visits hold every entry of the band and no tile
// without one, and a tile that skips the mask has only band entries. The sizes cover the
// kernels' tiles (8, 16 and 32 rows, 32 and 64 keys, 64 and 128 query rows).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/graph/op_table.h"
#include "kernels/detail/attn_band.h"

namespace remat::kernels::detail {
namespace {

// Bands as the kernels take them (AttnDims::band()): windows, and chunks as negative numbers.
std::vector<int> windows_for(int S) {
  std::vector<int> w = {0, 1, 2, 3, 5, 16, 31, 32, 33, 37, 63, 64, 65, 100};
  for (int e : {S - 1, S, S + 1})
    if (e > 0) w.push_back(e);
  for (std::size_t k = 1, n = w.size(); k < n; ++k) w.push_back(-w[k]);
  return w;
}

const int kSizes[] = {1, 2, 7, 16, 31, 32, 33, 63, 64, 65, 70, 129, 200};

TEST(AttnBand, MatchesTheCpuMask) {
  for (int S : kSizes)
    for (int w : windows_for(S)) {
      AttnDims a;
      a.S = S;
      (w > 0 ? a.window : a.chunk) = w > 0 ? w : -w;
      ASSERT_EQ(a.band(), w);
      const int wn = band_within(w, S);  // what the launchers pass
      for (int i = 0; i < S; ++i) {
        ASSERT_EQ(band_first_key(w, i), a.first_key(i)) << "S " << S << " w " << w << " i " << i;
        ASSERT_EQ(band_first_key(wn, i), a.first_key(i)) << "S " << S << " w " << w << " i " << i;
        for (int j = 0; j < S; ++j) {
          const bool cpu = a.first_key(i) <= j && j <= i;
          ASSERT_EQ(in_band(w, i, j), cpu) << "S " << S << " w " << w << " i " << i << " j " << j;
          ASSERT_EQ(in_band(wn, i, j), cpu) << "S " << S << " w " << w << " i " << i << " j " << j;
        }
      }
      for (int j = 0; j < S; ++j) {
        // The last query that sees key j sees it, the next one (if any) does not.
        const int last = band_last_query(wn, j, S);
        ASSERT_TRUE(in_band(wn, last, j)) << "S " << S << " w " << w << " j " << j;
        if (last + 1 < S) {
          ASSERT_FALSE(in_band(wn, last + 1, j)) << "S " << S << " w " << w << " j " << j;
        }
      }
    }
}

TEST(AttnBand, KeyTilesOfAQueryBlockHoldItsBandAndNoMore) {
  for (int S : kSizes)
    for (int w : windows_for(S)) {
      const int wn = band_within(w, S);
      for (int rows : {8, 32, 64, 128})
        for (int tile : {32, 64})
          for (int q0 = 0; q0 < S; q0 += rows) {
            const int q_last = std::min(q0 + rows - 1, S - 1);
            const TileRange r = band_key_tiles(wn, q0, q_last, tile);
            ASSERT_LT(r.first, r.end);
            std::vector<int> hits((S + tile - 1) / tile, 0);
            for (int i = q0; i <= q_last; ++i)
              for (int j = 0; j < S; ++j)
                if (in_band(wn, i, j)) ++hits[j / tile];
            for (int t = 0; t < static_cast<int>(hits.size()); ++t) {
              const bool visited = t >= r.first && t < r.end;
              if (hits[t] > 0) {
                ASSERT_TRUE(visited) << "S " << S << " w " << w << " q0 " << q0 << " tile " << t;
              }
            }
            // The first and the last tile visited hold band entries (nothing wasted at the ends;
            // between them every tile does, the band being contiguous).
            ASSERT_GT(hits[r.first], 0) << "S " << S << " w " << w << " q0 " << q0;
            ASSERT_GT(hits[r.end - 1], 0) << "S " << S << " w " << w << " q0 " << q0;
          }
    }
}

TEST(AttnBand, QueryTilesOfAKeyBlockHoldEveryQueryThatSeesIt) {
  for (int S : kSizes)
    for (int w : windows_for(S)) {
      const int wn = band_within(w, S);
      for (int keys : {32, 64})
        for (int tile : {32, 64})
          for (int k0 = 0; k0 < S; k0 += keys) {
            const int k_last = std::min(k0 + keys - 1, S - 1);
            const TileRange r = band_query_tiles(wn, k0, k_last, S, tile);
            ASSERT_LT(r.first, r.end);
            std::vector<int> hits((S + tile - 1) / tile, 0);
            for (int j = k0; j <= k_last; ++j)
              for (int i = 0; i < S; ++i)
                if (in_band(wn, i, j)) ++hits[i / tile];
            for (int t = 0; t < static_cast<int>(hits.size()); ++t) {
              if (hits[t] > 0) {
                ASSERT_TRUE(t >= r.first && t < r.end)
                    << "S " << S << " w " << w << " k0 " << k0 << " tile " << t;
              }
            }
            ASSERT_GT(hits[r.first], 0) << "S " << S << " w " << w << " k0 " << k0;
            ASSERT_GT(hits[r.end - 1], 0) << "S " << S << " w " << w << " k0 " << k0;
          }
    }
}

TEST(AttnBand, TilesThatSkipTheMaskHoldOnlyBandEntries) {
  int skipped = 0;
  for (int S : kSizes)
    for (int w : windows_for(S)) {
      const int wn = band_within(w, S);
      for (int BN : {32, 64})
        for (int row0 = 0; row0 < S; row0 += 16)
          for (int key0 = 0; key0 < S; key0 += BN) {
            if (tile_needs_mask(key0, BN, row0, S, wn)) continue;
            ++skipped;
            for (int i = row0; i < std::min(row0 + 16, S); ++i)
              for (int j = key0; j < key0 + BN; ++j)
                ASSERT_TRUE(j < S && in_band(wn, i, j))
                    << "S " << S << " w " << w << " row0 " << row0 << " key0 " << key0;
          }
    }
  EXPECT_GT(skipped, 0) << "no tile ever skipped the mask";
}

TEST(AttnBand, CappedScores) {
  EXPECT_EQ(capped_score(3.5f, 0.0f), 3.5f);  // no cap: the raw score
  for (float cap : {2.0f, 50.0f})
    for (float raw : {-400.0f, -3.0f, -0.25f, 0.0f, 0.5f, 7.0f, 1000.0f}) {
      const float t = cap_tanh(raw, cap), s = capped_score(raw, cap);
      EXPECT_EQ(s, t * cap);
      EXPECT_LE(std::fabs(s), cap);
      EXPECT_NEAR(s, cap * std::tanh(static_cast<double>(raw) / cap), 1e-5 * cap);
    }
}

// The backward kernels' form: the same score as capped_score of the scaled product, and the
// slope of the cap (1 without one), against the double-precision derivative.
TEST(AttnBand, ScoreAndSlope) {
  float slope = 0.0f;
  EXPECT_EQ(score_and_slope(2.0f, 0.25f, 0.0f, &slope), 0.5f);
  EXPECT_EQ(slope, 1.0f);
  for (float cap : {2.0f, 50.0f})
    for (float qk : {-40.0f, -1.0f, 0.0f, 3.0f, 120.0f}) {
      const float s = score_and_slope(qk, 0.125f, cap, &slope);
      EXPECT_EQ(s, capped_score(qk * 0.125f, cap));
      const double t = std::tanh(static_cast<double>(qk) * 0.125 / cap);
      EXPECT_NEAR(slope, 1.0 - t * t, 1e-6) << "qk " << qk << " cap " << cap;
    }
}

}  // namespace
}  // namespace remat::kernels::detail
