// The mask and score map every attention kernel shares (naive and flash), as the CPU backend
// defines them (AttnDims, core/graph/op_table.h), and the tile ranges the kernels visit:
// - band: query i sees keys first_key(i) <= j <= i. The kernels take the band as one int,
//   `window` (AttnDims::band()): > 0, a sliding window, first_key(i) = i - window + 1 when
//   i >= window, else 0 (window keys including itself); < 0, chunks of c = -window tokens
//   (Llama 4's chunked attention), first_key(i) = (i / c) * c; 0, plain causal. Callers may
//   pass 0 when the window or the chunk covers S (the same mask): band_within(window, S).
// - soft cap: raw = (q . k) * scale; with softcap > 0, t = tanhf(raw / softcap) and the score is
//   t * softcap; the gradient with respect to raw is the score's times (1 - t * t).
// Plain C++ with REMAT_HD functions, shared by the device code and the host tests
// (tests/gpu/attn_band_test.cpp).
#pragma once
#include <cmath>

#include "core/util/bf16.h"  // REMAT_HD

namespace remat::kernels::detail {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// The band itself, or 0 when it leaves every causal pair of S tokens visible.
REMAT_HD int band_within(int window, int S) {
  return window >= S || -window >= S ? 0 : window;
}

// First key query i sees.
REMAT_HD int band_first_key(int window, int i) {
  if (window < 0) return i / -window * -window;
  return window > 0 && i >= window ? i - window + 1 : 0;
}

// Last query (below S) that sees key j.
REMAT_HD int band_last_query(int window, int j, int S) {
  const int last = window > 0 ? j + window - 1 : window < 0 ? (j / -window + 1) * -window - 1 : S - 1;
  return last < S - 1 ? last : S - 1;
}

// Whether query i sees key j.
REMAT_HD bool in_band(int window, int i, int j) {
  return j <= i && j >= band_first_key(window, i);
}

// Tiles [first, end) of `tile` elements.
struct TileRange {
  int first, end;
};

// The key tiles that meet the band of some query q0 .. q_last (q_last < S).
REMAT_HD TileRange band_key_tiles(int window, int q0, int q_last, int tile) {
  return {band_first_key(window, q0) / tile, q_last / tile + 1};
}

// The query tiles that hold a query seeing some key k0 .. k_last (k_last < S).
REMAT_HD TileRange band_query_tiles(int window, int k0, int k_last, int S, int tile) {
  return {k0 / tile, band_last_query(window, k_last, S) / tile + 1};
}

// Whether a tile of BN keys from key0 has entries to mask for the 16 rows from row0: keys right
// of a row's diagonal, at or past S, or left of the band of the group's last row (the largest
// first key).
REMAT_HD bool tile_needs_mask(int key0, int BN, int row0, int S, int window) {
  return key0 + BN - 1 > row0 || key0 + BN > S || key0 < band_first_key(window, row0 + 15);
}

// t = tanhf(raw / cap) (cap > 0).
REMAT_HD float cap_tanh(float raw, float cap) { return tanhf(raw / cap); }

// The score of a raw (scaled) product: t * cap soft-capped, raw itself when cap is 0.
REMAT_HD float capped_score(float raw, float cap) {
  return cap > 0.0f ? cap_tanh(raw, cap) * cap : raw;
}

// The score of an unscaled product q . k, and in *slope d score / d (q . k * scale): 1 - t^2
// soft-capped, else 1 (the backward kernels' form).
REMAT_HD float score_and_slope(float qk, float scale, float cap, float* slope) {
  if (cap > 0.0f) {
    const float t = cap_tanh(qk * scale, cap);
    *slope = 1.0f - t * t;
    return t * cap;
  }
  *slope = 1.0f;
  return qk * scale;
}

}  // namespace remat::kernels::detail
