// Warp-level pieces of the tensor-core attention kernels that look at score tiles: a warp owns
// groups of 16 query rows (rows row_a and row_a + 8 of each C fragment, row_a = the group's
// first row + lane / 4) and multiplies them with a tile of BN keys held in shared memory (row
// pitch LD elements).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/detail/attn_band.h"
#include "kernels/detail/device_utils.cuh"
#include "kernels/detail/mma.cuh"

namespace remat::kernels::detail {

// The A fragments of rows 16 group .. 16 group + 15 of Q (shared memory, pitch LD), D / 16 of
// them.
template <int D, int LD>
__device__ __forceinline__ void load_q_frags(std::uint32_t (&qf)[D / 16][4], const bf16* Qs,
                                             int group, int lane) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    ldmatrix_x4(qf[kk], Qs + (group * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
}

// s[t] = Q K^T for MT groups of 16 rows of the warp (fragments qf[t]) against the BN keys of
// Kst (fp32 accumulators); each K fragment is loaded once for all MT groups.
template <int D, int BN, int LD, int MT>
__device__ __forceinline__ void qk_tiles(float (&s)[MT][BN / 8][4],
                                         const std::uint32_t (&qf)[MT][D / 16][4],
                                         const bf16* Kst, int lane) {
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int i = 0; i < BN / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[t][i][e] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
    for (int np = 0; np < BN / 16; ++np) {
      std::uint32_t bb[4];
      ldmatrix_x4(bb, Kst + (np * 16 + (lane & 7) + (lane >> 4) * 8) * LD + kk * 16 +
                          ((lane >> 3) & 1) * 8);
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        mma_bf16(s[t][2 * np], qf[t][kk], bb[0], bb[1]);
        mma_bf16(s[t][2 * np + 1], qf[t][kk], bb[2], bb[3]);
      }
    }
  }
}

// The same for one group of 16 rows.
template <int D, int BN, int LD>
__device__ __forceinline__ void qk_tile(float (&s)[BN / 8][4], const std::uint32_t (&qf)[D / 16][4],
                                        const bf16* Kst, int lane) {
  qk_tiles<D, BN, LD, 1>(reinterpret_cast<float(&)[1][BN / 8][4]>(s),
                         reinterpret_cast<const std::uint32_t(&)[1][D / 16][4]>(qf), Kst, lane);
}

// How a tile's products q . k become exp2-domain scores: times scale_log2 (= scale * log2 e), or
// soft-capped (scale, softcap > 0: t = tanhf(q . k * scale / softcap), score t * softcap, then
// times log2 e); keys outside the band (the band of attn_band.h) are masked.
struct ScoreMap {
  float scale_log2, scale, softcap;
  int window;
};

// Scores to the exp2 domain (ScoreMap); keys right of a row's diagonal, left of its band or at
// or past S become -inf. need_mask false (tile_needs_mask) skips the tests.
template <int BN>
__device__ __forceinline__ void scale_mask_tile(float (&s)[BN / 8][4], const ScoreMap& m, int key0,
                                                int row_a, int tq, int S, bool need_mask) {
#pragma unroll
  for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = key0 + nt * 8 + tq * 2 + (e & 1);
      const int row = row_a + (e >> 1) * 8;
      float v = m.softcap > 0.0f ? capped_score(s[nt][e] * m.scale, m.softcap) * kLog2e
                                 : s[nt][e] * m.scale_log2;
      if (need_mask && (!in_band(m.window, row, key) || key >= S)) v = -INFINITY;
      s[nt][e] = v;
    }
}

// The A fragment (16 x 16, bf16) of columns 16 kk .. 16 kk + 15 of a warp's 16-row fp32
// accumulator tile c (the C fragments of n-tiles 2 kk and 2 kk + 1): P or dS as the left
// operand of the next product.
template <int N>
__device__ __forceinline__ void pack_a_frag(std::uint32_t (&a)[4], const float (&c)[N][4], int kk) {
  a[0] = pack_bf16x2(c[2 * kk][0], c[2 * kk][1]);
  a[1] = pack_bf16x2(c[2 * kk][2], c[2 * kk][3]);
  a[2] = pack_bf16x2(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = pack_bf16x2(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

// acc[t] += c[t] X for MT groups of 16 rows: c[t] the warp's fp32 tile against BN keys (packed
// to bf16 A fragments), X the BN x D tile in shared memory (pitch LD) read transposed; each X
// fragment is loaded once for all MT groups. (P V in the forward, dS K for dQ.)
template <int D, int BN, int LD, int MT>
__device__ __forceinline__ void pv_tiles(float (&acc)[MT][D / 8][4], const float (&c)[MT][BN / 8][4],
                                         const bf16* X, int lane) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    std::uint32_t a[MT][4];
#pragma unroll
    for (int t = 0; t < MT; ++t) pack_a_frag(a[t], c[t], kk);
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      std::uint32_t bb[4];
      ldmatrix_x4_trans(bb, X + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + dp * 16 +
                                (lane >> 4) * 8);
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        mma_bf16(acc[t][2 * dp], a[t], bb[0], bb[1]);
        mma_bf16(acc[t][2 * dp + 1], a[t], bb[2], bb[3]);
      }
    }
  }
}

}  // namespace remat::kernels::detail
