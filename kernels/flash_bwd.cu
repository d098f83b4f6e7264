// Flash attention backward, deterministic: D = rowsum(dO * O) first; then one pass per key tile
// that accumulates dK and dV over the query tiles of every q head of its kv group, and one pass
// per query tile for dQ. Each output element has a single owner; no floating-point atomics.
// Only tiles that meet the band (window) are visited; soft-capped scores are recomputed from q
// and k, and dS is taken with respect to the raw score (times 1 - t^2).
#include <algorithm>

#include "kernels/detail/attn_tile.cuh"
#include "kernels/detail/flash_common.cuh"
#include "kernels/detail/mma.cuh"
#include "kernels/detail/tile_load.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

// D[b, h, i] = sum_c dO[b, i, h*dv + c] * O[b, i, h*dv + c]; one warp per row.
template <class T>
__global__ void __launch_bounds__(256) flash_bwd_dvec(FlashDev p) {
  const int lane = threadIdx.x & 31;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  const std::int64_t rows = static_cast<std::int64_t>(p.B) * p.heads * p.S;
  if (row >= rows) return;
  const std::int64_t i = row % p.S, bh = row / p.S;
  const std::int64_t h = bh % p.heads, b = bh / p.heads;
  const std::int64_t off = (b * p.S + i) * p.ctx_width + h * p.dv;
  const T* O = static_cast<const T*>(p.ctx) + off;
  const T* dO = static_cast<const T*>(p.dctx) + off;
  float s = 0.0f;
  for (int c = lane; c < p.dv; c += 32) s += to_f(dO[c]) * to_f(O[c]);
  s = warp_sum(s);
  if (lane == 0) p.dvec[row] = s;
}

// ---------------------------------------------------------------------------------------------
// Scalar backward (fp32 arithmetic, any head dim and value width <= 256; DK registers per
// output row cover both: 32 DK >= max(d, dv)).
// Two dot products per (query, key): q . k over d and dO . v over dv; their common columns in
// one loop, then the rest of the longer one (each sum in column order whatever the widths).
// dK/dV: a block owns 32 keys (4 per warp); query tiles of 32 staged in shared memory. Lane i
// scores query i against one key; then lanes switch to output columns to accumulate.
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ void qk_and_dov(const float* qrow, const float* krow,
                                           const float* orow, const float* vrow, int d, int dv,
                                           float& s, float& dp) {
  const int both = min(d, dv);
  int c = 0;
  for (; c < both; ++c) {
    s += qrow[c] * krow[c];
    dp += orow[c] * vrow[c];
  }
  for (int e = c; e < d; ++e) s += qrow[e] * krow[e];
  for (int e = c; e < dv; ++e) dp += orow[e] * vrow[e];
}

template <class T, int DK>
__global__ void __launch_bounds__(256) flash_bwd_dkdv_scalar(FlashDev p) {
  extern __shared__ float sm[];
  const int d = p.d, dv = p.dv, ld = d + 1, ldv = dv + 1, dm = max(d, dv);
  float* Ks = sm;              // [32][ld]
  float* Vs = Ks + 32 * ld;    // [32][ldv]
  float* Qs = Vs + 32 * ldv;   // [32][ld]
  float* dOs = Qs + 32 * ld;   // [32][ldv]
  float* Ls = dOs + 32 * ldv;  // [32]
  float* Dd = Ls + 32;        // [32]
  float* buf = Dd + 32;       // [8 warps][2][32]
  const int kt = blockIdx.x, g = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int S = p.S, W = p.width;
  const std::int64_t brow = static_cast<std::int64_t>(b) * S;
  const T* qkv = static_cast<const T*>(p.qkv);
  const T* dctx = static_cast<const T*>(p.dctx);
  const int k0 = kt * 32;
  const int kcol = (p.heads + g) * d, vcol = (p.heads + p.kv_heads) * d + g * dv;
  for (int idx = threadIdx.x; idx < 32 * dm; idx += blockDim.x) {
    const int r = idx / dm, c = idx % dm, key = k0 + r;
    const bool ok = key < S;
    const std::int64_t base = (brow + (ok ? key : 0)) * W;
    if (c < d) Ks[r * ld + c] = ok ? to_f(qkv[base + kcol + c]) : 0.0f;
    if (c < dv) Vs[r * ldv + c] = ok ? to_f(qkv[base + vcol + c]) : 0.0f;
  }
  float dk[4][DK], dva[4][DK];  // dK and dV of the warp's 4 keys
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int k = 0; k < DK; ++k) dk[kk][k] = dva[kk][k] = 0.0f;
  float* pbuf = buf + warp * 64;
  float* sbuf = pbuf + 32;
  // The query tiles that see a key of this block: k0 .. the band's last query of its last key.
  const TileRange qtiles = band_query_tiles(p.window, k0, min(k0 + 31, S - 1), S, 32);
  for (int hi = 0; hi < p.group; ++hi) {
    const int h = g * p.group + hi;
    for (int qt = qtiles.first; qt < qtiles.end; ++qt) {
      const int q0 = qt * 32;
      __syncthreads();
      for (int idx = threadIdx.x; idx < 32 * dm; idx += blockDim.x) {
        const int r = idx / dm, c = idx % dm, row = q0 + r;
        const bool ok = row < S;
        const std::int64_t rr = brow + (ok ? row : 0);
        if (c < d) Qs[r * ld + c] = ok ? to_f(qkv[rr * W + h * d + c]) : 0.0f;
        if (c < dv) dOs[r * ldv + c] = ok ? to_f(dctx[rr * p.ctx_width + h * dv + c]) : 0.0f;
      }
      if (threadIdx.x < 32) {
        const int row = q0 + threadIdx.x;
        const std::int64_t li = (static_cast<std::int64_t>(b) * p.heads + h) * S + row;
        Ls[threadIdx.x] = row < S ? p.lse[li] : 0.0f;
        Dd[threadIdx.x] = row < S ? p.dvec[li] : 0.0f;
      }
      __syncthreads();
      const int qi = q0 + lane;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const int kr = warp * 4 + kk;
        const int kj = k0 + kr;
        float s = 0.0f, dp = 0.0f;
        qk_and_dov(Qs + lane * ld, Ks + kr * ld, dOs + lane * ldv, Vs + kr * ldv, d, dv, s, dp);
        const bool valid = in_band(p.window, qi, kj) && qi < S && kj < S;
        float dcap;  // d score / d raw
        s = score_and_slope(s, p.scale, p.softcap, &dcap);
        const float pij = valid ? expf(s - Ls[lane]) : 0.0f;
        float z = 1.0f;
        if (p.dropout && valid)
          z = keep_one(p.key, prob_index(p, b, h, qi, kj), p.thr) ? p.keep_scale : 0.0f;
        pbuf[lane] = pij * z;
        sbuf[lane] = pij * (dp * z - Dd[lane]) * dcap;
        __syncwarp();
        for (int ii = 0; ii < 32; ++ii) {
          const float pz = pbuf[ii], ds = sbuf[ii];
          const float* qr = Qs + ii * ld;
          const float* gr = dOs + ii * ldv;
#pragma unroll
          for (int k = 0; k < DK; ++k) {
            const int c = lane + 32 * k;
            if (c < dv) dva[kk][k] += pz * gr[c];
            if (c < d) dk[kk][k] += ds * qr[c];
          }
        }
        __syncwarp();
      }
    }
  }
  T* out = static_cast<T*>(p.dqkv);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const int kj = k0 + warp * 4 + kk;
    if (kj >= S) continue;
    const std::int64_t base = (brow + kj) * W;
#pragma unroll
    for (int k = 0; k < DK; ++k) {
      const int c = lane + 32 * k;
      if (c < d)
        out[base + kcol + c] = from_f<T>(to_f(out[base + kcol + c]) + dk[kk][k] * p.scale);
      if (c < dv) out[base + vcol + c] = from_f<T>(to_f(out[base + vcol + c]) + dva[kk][k]);
    }
  }
}

// dQ: a block owns 32 queries (4 per warp); key tiles of 32 in shared memory.
template <class T, int DK>
__global__ void __launch_bounds__(256) flash_bwd_dq_scalar(FlashDev p) {
  extern __shared__ float sm[];
  const int d = p.d, dv = p.dv, ld = d + 1, ldv = dv + 1, dm = max(d, dv);
  float* Qs = sm;              // [32][ld]
  float* dOs = Qs + 32 * ld;   // [32][ldv]
  float* Ks = dOs + 32 * ldv;  // [32][ld]
  float* Vs = Ks + 32 * ld;    // [32][ldv]
  float* Ls = Vs + 32 * ldv;
  float* Dd = Ls + 32;
  float* buf = Dd + 32;  // [8][32]
  const int qt = gridDim.x - 1 - blockIdx.x;
  const int h = blockIdx.y, b = blockIdx.z, g = h / p.group;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int S = p.S, W = p.width;
  const std::int64_t brow = static_cast<std::int64_t>(b) * S;
  const T* qkv = static_cast<const T*>(p.qkv);
  const T* dctx = static_cast<const T*>(p.dctx);
  const int q0 = qt * 32;
  const int kcol = (p.heads + g) * d, vcol = (p.heads + p.kv_heads) * d + g * dv;
  for (int idx = threadIdx.x; idx < 32 * dm; idx += blockDim.x) {
    const int r = idx / dm, c = idx % dm, row = q0 + r;
    const bool ok = row < S;
    const std::int64_t rr = brow + (ok ? row : 0);
    if (c < d) Qs[r * ld + c] = ok ? to_f(qkv[rr * W + h * d + c]) : 0.0f;
    if (c < dv) dOs[r * ldv + c] = ok ? to_f(dctx[rr * p.ctx_width + h * dv + c]) : 0.0f;
  }
  if (threadIdx.x < 32) {
    const int row = q0 + threadIdx.x;
    const std::int64_t li = (static_cast<std::int64_t>(b) * p.heads + h) * S + row;
    Ls[threadIdx.x] = row < S ? p.lse[li] : 0.0f;
    Dd[threadIdx.x] = row < S ? p.dvec[li] : 0.0f;
  }
  float dq[4][DK];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int k = 0; k < DK; ++k) dq[kk][k] = 0.0f;
  float* sbuf = buf + warp * 32;
  const TileRange ktiles = band_key_tiles(p.window, q0, min(q0 + 31, S - 1), 32);
  for (int kt = ktiles.first; kt < ktiles.end; ++kt) {
    const int k0 = kt * 32;
    __syncthreads();
    for (int idx = threadIdx.x; idx < 32 * dm; idx += blockDim.x) {
      const int r = idx / dm, c = idx % dm, key = k0 + r;
      const bool ok = key < S;
      const std::int64_t base = (brow + (ok ? key : 0)) * W;
      if (c < d) Ks[r * ld + c] = ok ? to_f(qkv[base + kcol + c]) : 0.0f;
      if (c < dv) Vs[r * ldv + c] = ok ? to_f(qkv[base + vcol + c]) : 0.0f;
    }
    __syncthreads();
    const int kj = k0 + lane;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int qr = warp * 4 + kk;
      const int qi = q0 + qr;
      float s = 0.0f, dp = 0.0f;
      qk_and_dov(Qs + qr * ld, Ks + lane * ld, dOs + qr * ldv, Vs + lane * ldv, d, dv, s, dp);
      const bool valid = in_band(p.window, qi, kj) && kj < S && qi < S;
      float dcap;
      s = score_and_slope(s, p.scale, p.softcap, &dcap);
      const float pij = valid ? expf(s - Ls[qr]) : 0.0f;
      float z = 1.0f;
      if (p.dropout && valid)
        z = keep_one(p.key, prob_index(p, b, h, qi, kj), p.thr) ? p.keep_scale : 0.0f;
      sbuf[lane] = pij * (dp * z - Dd[qr]) * dcap;
      __syncwarp();
      for (int jj = 0; jj < 32; ++jj) {
        const float ds = sbuf[jj];
        const float* kr = Ks + jj * ld;
#pragma unroll
        for (int k = 0; k < DK; ++k) {
          const int c = lane + 32 * k;
          if (c < d) dq[kk][k] += ds * kr[c];
        }
      }
      __syncwarp();
    }
  }
  T* out = static_cast<T*>(p.dqkv);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const int qi = q0 + warp * 4 + kk;
    if (qi >= S) continue;
    const std::int64_t base = (brow + qi) * W + h * d;
#pragma unroll
    for (int k = 0; k < DK; ++k) {
      const int c = lane + 32 * k;
      if (c < d) out[base + c] = from_f<T>(to_f(out[base + c]) + dq[kk][k] * p.scale);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Tensor-core backward (bf16; value heads d wide, as flash_tc_supported requires).
// ---------------------------------------------------------------------------------------------
template <int D>
struct BwdTc {
  static constexpr int LD = D + 8;
  static constexpr int BN = 64;                  // keys per dK/dV block
  static constexpr int BMQ = D <= 64 ? 64 : 32;  // queries per dK/dV step
  static constexpr int BM = 64;                  // queries per dQ block
  static constexpr int BNK = D <= 64 ? 64 : 32;  // keys per dQ step
  static constexpr int dkdv_smem() { return (2 * BN + 4 * BMQ) * LD * 2 + 4 * BMQ * 4; }
  static constexpr int dq_smem(int mt) { return (2 * BM * mt + 4 * BNK) * LD * 2; }
};

// dK, dV for 64 keys of kv head g: 4 warps x 16 keys; per step a tile of BMQ queries of one q
// head (double-buffered). S^T = K Q^T, dP^T = V dO^T, then dV += P^T dO, dK += dS^T Q.
template <int D>
__global__ void __launch_bounds__(128) flash_bwd_dkdv_tc(FlashDev p) {
  using C = BwdTc<D>;
  constexpr int BN = C::BN, BMQ = C::BMQ, LD = C::LD;
  extern __shared__ __align__(16) unsigned char smraw[];
  bf16* Ks = reinterpret_cast<bf16*>(smraw);
  bf16* Vs = Ks + BN * LD;
  bf16* Qs = Vs + BN * LD;       // [2][BMQ][LD]
  bf16* dOs = Qs + 2 * BMQ * LD;  // [2][BMQ][LD]
  float* Ls = reinterpret_cast<float*>(dOs + 2 * BMQ * LD);  // [2][BMQ]
  float* Dd = Ls + 2 * BMQ;                                  // [2][BMQ]
  const int S = p.S, W = p.width;
  const int kt = blockIdx.x, g = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, tq = lane & 3;
  const int key0 = kt * BN;
  const bf16* base = static_cast<const bf16*>(p.qkv) + static_cast<std::int64_t>(b) * S * W;
  const bf16* dobase =
      static_cast<const bf16*>(p.dctx) + static_cast<std::int64_t>(b) * S * p.ctx_width;
  // The query tiles that see a key of this block, in every q head of the group.
  const TileRange qtiles = band_query_tiles(p.window, key0, min(key0 + BN - 1, S - 1), S, BMQ);
  const int qt_start = qtiles.first;
  const int per_head = qtiles.end - qt_start;
  const int total = p.group * per_head;

  auto issue = [&](int it, int st) {
    const int hi = it / per_head, qt = qt_start + it % per_head;
    const int h = g * p.group + hi, q0 = qt * BMQ;
    load_rows<D>(Qs + st * BMQ * LD, base + h * D, q0, BMQ, S, W, tid);
    load_rows<D>(dOs + st * BMQ * LD, dobase + h * D, q0, BMQ, S, p.ctx_width, tid);
    for (int i = tid; i < BMQ; i += 128) {
      const int row = q0 + i;
      const bool ok = row < S;
      const std::int64_t li = (static_cast<std::int64_t>(b) * p.heads + h) * S + (ok ? row : 0);
      cp_async4(Ls + st * BMQ + i, p.lse + li, ok);
      cp_async4(Dd + st * BMQ + i, p.dvec + li, ok);
    }
  };

  load_rows<D>(Ks, base + (p.heads + g) * D, key0, BN, S, W, tid);
  load_rows<D>(Vs, base + (p.heads + p.kv_heads + g) * D, key0, BN, S, W, tid);
  issue(0, 0);
  cp_async_commit();

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[i][e] = dv[i][e] = 0.0f;
  const int krow_a = key0 + warp * 16 + (lane >> 2);
  // This block's K and V fragments never change: kept in registers where they fit (d <= 64).
  constexpr bool kHoist = D <= 64;
  std::uint32_t kf[kHoist ? D / 16 : 1][4], vf[kHoist ? D / 16 : 1][4];

  for (int it = 0; it < total; ++it) {
    if (it + 1 < total) {
      issue(it + 1, (it + 1) & 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int st = it & 1;
    const int hi = it / per_head, qt = qt_start + it % per_head;
    const int h = g * p.group + hi, q0 = qt * BMQ;
    const bf16* Qt = Qs + st * BMQ * LD;
    const bf16* dOt = dOs + st * BMQ * LD;
    const float* Lt = Ls + st * BMQ;
    const float* Dt = Dd + st * BMQ;

    float sT[BMQ / 8][4], dpT[BMQ / 8][4];
#pragma unroll
    for (int i = 0; i < BMQ / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) sT[i][e] = dpT[i][e] = 0.0f;
    if (kHoist && it == 0) {
#pragma unroll
      for (int kk = 0; kk < (kHoist ? D / 16 : 0); ++kk) {
        ldmatrix_x4(kf[kk], Ks + (warp * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
        ldmatrix_x4(vf[kk], Vs + (warp * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
      }
    }
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      std::uint32_t ka[4], va[4];
      if constexpr (kHoist) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          ka[e] = kf[kk][e];
          va[e] = vf[kk][e];
        }
      } else {
        ldmatrix_x4(ka, Ks + (warp * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
        ldmatrix_x4(va, Vs + (warp * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
      }
#pragma unroll
      for (int np = 0; np < BMQ / 16; ++np) {
        std::uint32_t bq[4], bo[4];
        const int off = (np * 16 + (lane & 7) + (lane >> 4) * 8) * LD + kk * 16 +
                        ((lane >> 3) & 1) * 8;
        ldmatrix_x4(bq, Qt + off);
        ldmatrix_x4(bo, dOt + off);
        mma_bf16(sT[2 * np], ka, bq[0], bq[1]);
        mma_bf16(sT[2 * np + 1], ka, bq[2], bq[3]);
        mma_bf16(dpT[2 * np], va, bo[0], bo[1]);
        mma_bf16(dpT[2 * np + 1], va, bo[2], bo[3]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < BMQ / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int kj = krow_a + (e >> 1) * 8;
        const int ql = nt * 8 + tq * 2 + (e & 1);
        const int qi = q0 + ql;
        const bool valid = in_band(p.window, qi, kj) && qi < S && kj < S;
        float v2, dcap = 1.0f;  // the exp2-domain score; d score / d raw
        if (p.softcap > 0.0f) {
          const float t = cap_tanh(sT[nt][e] * p.scale, p.softcap);
          v2 = t * p.softcap * kLog2e;
          dcap = 1.0f - t * t;
        } else {
          v2 = sT[nt][e] * p.scale_log2;
        }
        const float pt = valid ? exp2f(v2 - Lt[ql] * kLog2e) : 0.0f;
        float z = 1.0f;
        if (p.dropout && valid)
          z = keep_one(p.key, prob_index(p, b, h, qi, kj), p.thr) ? p.keep_scale : 0.0f;
        sT[nt][e] = pt * z;
        dpT[nt][e] = pt * (dpT[nt][e] * z - Dt[ql]) * dcap;
      }
#pragma unroll
    for (int kk = 0; kk < BMQ / 16; ++kk) {
      std::uint32_t pa[4], sa[4];
      pack_a_frag(pa, sT, kk);
      pack_a_frag(sa, dpT, kk);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        std::uint32_t bo[4], bq[4];
        const int off = (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + dp * 16 +
                        (lane >> 4) * 8;
        ldmatrix_x4_trans(bo, dOt + off);
        ldmatrix_x4_trans(bq, Qt + off);
        mma_bf16(dv[2 * dp], pa, bo[0], bo[1]);
        mma_bf16(dv[2 * dp + 1], pa, bo[2], bo[3]);
        mma_bf16(dk[2 * dp], sa, bq[0], bq[1]);
        mma_bf16(dk[2 * dp + 1], sa, bq[2], bq[3]);
      }
    }
    __syncthreads();
  }

  bf16* out = static_cast<bf16*>(p.dqkv);
  const int kcol = (p.heads + g) * D, vcol = (p.heads + p.kv_heads + g) * D;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int kj = krow_a + r * 8;
    if (kj >= S) continue;
    bf16* row = out + (static_cast<std::int64_t>(b) * S + kj) * W;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      const int c = dn * 8 + tq * 2;
      std::uint32_t* kp = reinterpret_cast<std::uint32_t*>(row + kcol + c);
      std::uint32_t* vp = reinterpret_cast<std::uint32_t*>(row + vcol + c);
      const std::uint32_t ko = *kp, vo = *vp;
      *kp = pack_bf16x2(to_f(static_cast<bf16>(ko & 0xffffu)) + dk[dn][2 * r] * p.scale,
                        to_f(static_cast<bf16>(ko >> 16)) + dk[dn][2 * r + 1] * p.scale);
      *vp = pack_bf16x2(to_f(static_cast<bf16>(vo & 0xffffu)) + dv[dn][2 * r],
                        to_f(static_cast<bf16>(vo >> 16)) + dv[dn][2 * r + 1]);
    }
  }
}

// dQ for 64 MT queries of head h: 4 warps, each with MT groups of 16 queries (each K and V
// fragment serves the MT groups); key tiles of BNK double-buffered. Every query row sees the
// same key tiles in the same order whatever MT is, so the results are the same bits.
template <int D, int MT>
__global__ void __launch_bounds__(128) flash_bwd_dq_tc(FlashDev p) {
  using C = BwdTc<D>;
  constexpr int BM = C::BM * MT, BNK = C::BNK, LD = C::LD;
  extern __shared__ __align__(16) unsigned char smraw[];
  bf16* Qs = reinterpret_cast<bf16*>(smraw);
  bf16* dOs = Qs + BM * LD;
  bf16* Ks = dOs + BM * LD;       // [2][BNK][LD]
  bf16* Vs = Ks + 2 * BNK * LD;   // [2][BNK][LD]
  const int S = p.S, W = p.width;
  const int qt = gridDim.x - 1 - blockIdx.x;
  const int h = blockIdx.y, b = blockIdx.z, g = h / p.group;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, tq = lane & 3;
  const int q0 = qt * BM;
  const bf16* base = static_cast<const bf16*>(p.qkv) + static_cast<std::int64_t>(b) * S * W;
  const bf16* dobase =
      static_cast<const bf16*>(p.dctx) + static_cast<std::int64_t>(b) * S * p.ctx_width;
  const bf16* ksrc = base + (p.heads + g) * D;
  const bf16* vsrc = base + (p.heads + p.kv_heads + g) * D;
  const TileRange tiles = band_key_tiles(p.window, q0, min(q0 + BM - 1, S - 1), BNK);
  const int kt0 = tiles.first, n_kt = tiles.end;

  load_rows<D>(Qs, base + h * D, q0, BM, S, W, tid);
  load_rows<D>(dOs, dobase + h * D, q0, BM, S, p.ctx_width, tid);
  load_rows<D>(Ks + (kt0 & 1) * BNK * LD, ksrc, kt0 * BNK, BNK, S, W, tid);
  load_rows<D>(Vs + (kt0 & 1) * BNK * LD, vsrc, kt0 * BNK, BNK, S, W, tid);
  cp_async_commit();

  int row_a[MT];
  float lse2[MT][2], dd[MT][2];
  float dq[MT][D / 8][4];
#pragma unroll
  for (int t = 0; t < MT; ++t) {
    row_a[t] = q0 + (warp * MT + t) * 16 + (lane >> 2);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row_a[t] + r * 8;
      const std::int64_t li = (static_cast<std::int64_t>(b) * p.heads + h) * S + row;
      lse2[t][r] = row < S ? p.lse[li] * kLog2e : 0.0f;
      dd[t][r] = row < S ? p.dvec[li] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) dq[t][i][e] = 0.0f;
  }

  for (int kt = kt0; kt < n_kt; ++kt) {
    if (kt + 1 < n_kt) {
      const int st = (kt + 1) & 1;
      load_rows<D>(Ks + st * BNK * LD, ksrc, (kt + 1) * BNK, BNK, S, W, tid);
      load_rows<D>(Vs + st * BNK * LD, vsrc, (kt + 1) * BNK, BNK, S, W, tid);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const bf16* Kst = Ks + (kt & 1) * BNK * LD;
    const bf16* Vst = Vs + (kt & 1) * BNK * LD;
    float s[MT][BNK / 8][4], dp[MT][BNK / 8][4];
#pragma unroll
    for (int t = 0; t < MT; ++t)
#pragma unroll
      for (int i = 0; i < BNK / 8; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[t][i][e] = dp[t][i][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      std::uint32_t qa[MT][4], oa[MT][4];
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        const int r16 = (warp * MT + t) * 16 + (lane & 15);
        ldmatrix_x4(qa[t], Qs + r16 * LD + kk * 16 + (lane >> 4) * 8);
        ldmatrix_x4(oa[t], dOs + r16 * LD + kk * 16 + (lane >> 4) * 8);
      }
#pragma unroll
      for (int np = 0; np < BNK / 16; ++np) {
        std::uint32_t bk[4], bv[4];
        const int off = (np * 16 + (lane & 7) + (lane >> 4) * 8) * LD + kk * 16 +
                        ((lane >> 3) & 1) * 8;
        ldmatrix_x4(bk, Kst + off);
        ldmatrix_x4(bv, Vst + off);
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          mma_bf16(s[t][2 * np], qa[t], bk[0], bk[1]);
          mma_bf16(s[t][2 * np + 1], qa[t], bk[2], bk[3]);
          mma_bf16(dp[t][2 * np], oa[t], bv[0], bv[1]);
          mma_bf16(dp[t][2 * np + 1], oa[t], bv[2], bv[3]);
        }
      }
    }
    const int key0 = kt * BNK;
#pragma unroll
    for (int t = 0; t < MT; ++t)
#pragma unroll
      for (int nt = 0; nt < BNK / 8; ++nt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int qi = row_a[t] + r * 8;
          const int kj = key0 + nt * 8 + tq * 2;
          bool z0 = true, z1 = true;
          if (p.dropout && qi < S && kj < S) keep_pair(p.key, prob_index(p, b, h, qi, kj), p.thr, z0, z1);
#pragma unroll
          for (int e1 = 0; e1 < 2; ++e1) {
            const int e = 2 * r + e1;
            const int k = kj + e1;
            const bool valid = in_band(p.window, qi, k) && k < S && qi < S;
            float v2, dcap = 1.0f;  // the exp2-domain score; d score / d raw
            if (p.softcap > 0.0f) {
              const float tc = cap_tanh(s[t][nt][e] * p.scale, p.softcap);
              v2 = tc * p.softcap * kLog2e;
              dcap = 1.0f - tc * tc;
            } else {
              v2 = s[t][nt][e] * p.scale_log2;
            }
            const float pt = valid ? exp2f(v2 - lse2[t][r]) : 0.0f;
            const float z = p.dropout ? ((e1 == 0 ? z0 : z1) ? p.keep_scale : 0.0f) : 1.0f;
            s[t][nt][e] = pt * (dp[t][nt][e] * z - dd[t][r]) * dcap;
          }
        }
    pv_tiles<D, BNK, LD, MT>(dq, s, Kst, lane);
    __syncthreads();
  }

  bf16* out = static_cast<bf16*>(p.dqkv);
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int qi = row_a[t] + r * 8;
      if (qi >= S) continue;
      bf16* row = out + (static_cast<std::int64_t>(b) * S + qi) * W + h * D;
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) {
        const int c = dn * 8 + tq * 2;
        std::uint32_t* qp = reinterpret_cast<std::uint32_t*>(row + c);
        const std::uint32_t qo = *qp;
        *qp = pack_bf16x2(to_f(static_cast<bf16>(qo & 0xffffu)) + dq[t][dn][2 * r] * p.scale,
                          to_f(static_cast<bf16>(qo >> 16)) + dq[t][dn][2 * r + 1] * p.scale);
      }
    }
}

// --- launchers ---

template <class T>
void launch_dvec(const FlashDev& p, cudaStream_t s) {
  const std::int64_t rows = static_cast<std::int64_t>(p.B) * p.heads * p.S;
  flash_bwd_dvec<T><<<static_cast<unsigned>((rows + 7) / 8), 256, 0, s>>>(p);
  check_launch("flash_bwd_dvec");
}

// Attention sinks: one block per head, dsinks[h] -= sum over (b, i) of exp(sink - lse) * D;
// each thread's rows in order, then a fixed tree, in double: no atomics, the same bits every run.
template <class T>
__global__ void __launch_bounds__(256) flash_bwd_sinks(FlashDev p, T* dsinks) {
  __shared__ double part[256];
  const int h = blockIdx.x;
  const float sink = to_f(static_cast<const T*>(p.sinks)[h]);
  const std::int64_t rows = static_cast<std::int64_t>(p.B) * p.S;
  double acc = 0.0;
  for (std::int64_t r = threadIdx.x; r < rows; r += 256) {
    const std::int64_t li = (r / p.S * p.heads + h) * p.S + r % p.S;
    acc += static_cast<double>(expf(sink - p.lse[li])) * p.dvec[li];
  }
  acc = detail::block_sum_fixed<256>(acc, part);
  if (threadIdx.x == 0) dsinks[h] = from_f<T>(to_f(dsinks[h]) - static_cast<float>(acc));
}

void launch_sinks(FType t, const FlashDev& p, void* dsinks, cudaStream_t s) {
  if (!p.sinks) return;
  const unsigned blocks = static_cast<unsigned>(p.heads);
  if (t == FType::BF16)
    flash_bwd_sinks<bf16><<<blocks, 256, 0, s>>>(p, static_cast<bf16*>(dsinks));
  else
    flash_bwd_sinks<float><<<blocks, 256, 0, s>>>(p, static_cast<float*>(dsinks));
  check_launch("flash_bwd_sinks");
}

template <class T, int DK>
void launch_scalar(const FlashDev& p, cudaStream_t s) {
  const int tiles = 2 * 32 * (p.d + 1) + 2 * 32 * (p.dv + 1);  // K, Q and V, dO as fp32
  {
    const int smem = (tiles + 64 + 8 * 64) * 4;
    auto kernel = flash_bwd_dkdv_scalar<T, DK>;
    if (smem > 48 * 1024)
      set_smem_limit(reinterpret_cast<const void*>(kernel), smem, "flash_bwd_dkdv_scalar");
    dim3 grid(static_cast<unsigned>((p.S + 31) / 32), static_cast<unsigned>(p.kv_heads),
              static_cast<unsigned>(p.B));
    kernel<<<grid, 256, smem, s>>>(p);
    check_launch("flash_bwd_dkdv_scalar");
  }
  {
    const int smem = (tiles + 64 + 8 * 32) * 4;
    auto kernel = flash_bwd_dq_scalar<T, DK>;
    if (smem > 48 * 1024)
      set_smem_limit(reinterpret_cast<const void*>(kernel), smem, "flash_bwd_dq_scalar");
    dim3 grid(static_cast<unsigned>((p.S + 31) / 32), static_cast<unsigned>(p.heads),
              static_cast<unsigned>(p.B));
    kernel<<<grid, 256, smem, s>>>(p);
    check_launch("flash_bwd_dq_scalar");
  }
}

template <class T>
void dispatch_scalar(const FlashDev& p, cudaStream_t s) {
  if (p.d > 256 || p.dv > 256)
    throw Error("flash_bwd: head dim " + std::to_string(p.d) + " or value width " +
                std::to_string(p.dv) + " above 256 is not supported");
  const int dk = (std::max(p.d, p.dv) + 31) / 32;
  if (dk <= 1) launch_scalar<T, 1>(p, s);
  else if (dk <= 2) launch_scalar<T, 2>(p, s);
  else if (dk <= 4) launch_scalar<T, 4>(p, s);
  else launch_scalar<T, 8>(p, s);
}

template <int D, int MT>
void launch_tc(const FlashDev& p, cudaStream_t s) {
  using C = BwdTc<D>;
  {
    const int smem = C::dkdv_smem();
    auto kernel = flash_bwd_dkdv_tc<D>;
    if (smem > 48 * 1024)
      set_smem_limit(reinterpret_cast<const void*>(kernel), smem, "flash_bwd_dkdv_tc");
    dim3 grid(static_cast<unsigned>((p.S + C::BN - 1) / C::BN), static_cast<unsigned>(p.kv_heads),
              static_cast<unsigned>(p.B));
    kernel<<<grid, 128, smem, s>>>(p);
    check_launch("flash_bwd_dkdv_tc");
  }
  {
    const int smem = C::dq_smem(MT);
    auto kernel = flash_bwd_dq_tc<D, MT>;
    if (smem > 48 * 1024)
      set_smem_limit(reinterpret_cast<const void*>(kernel), smem, "flash_bwd_dq_tc");
    const int bm = C::BM * MT;
    dim3 grid(static_cast<unsigned>((p.S + bm - 1) / bm), static_cast<unsigned>(p.heads),
              static_cast<unsigned>(p.B));
    kernel<<<grid, 128, smem, s>>>(p);
    check_launch("flash_bwd_dq_tc");
  }
}

}  // namespace

void flash_bwd(FType t, const FlashArgs& a, FlashImpl impl, cudaStream_t s) {
  const FlashDev p = make_flash_dev(a);
  if (!a.scratch) throw Error("flash_bwd: no scratch for D = rowsum(dO * O)");
  if (a.sinks && !a.dsinks) throw Error("flash_bwd: attention sinks without their gradient");
  const bool tc = impl != FlashImpl::Scalar && flash_tc_supported(t, a, true);
  if (impl == FlashImpl::TensorCore && !tc)
    throw Error("flash_bwd: the tensor-core path needs bf16, d in {32, 64, 128}, value heads d "
                "wide and 16-byte aligned tensors (d=" + std::to_string(a.d) + ", dv=" +
                std::to_string(a.dv > 0 ? a.dv : a.d) + ")");
  if (t == FType::BF16) launch_dvec<bf16>(p, s);
  else launch_dvec<float>(p, s);
  if (tc) {
    if (a.row_groups != 1 && a.row_groups != 2)
      throw Error("flash_bwd: row_groups must be 1 or 2, got " + std::to_string(a.row_groups));
    const bool two = a.row_groups == 2;  // d = 128 keeps one group (registers)
    if (a.d == 32) two ? launch_tc<32, 2>(p, s) : launch_tc<32, 1>(p, s);
    else if (a.d == 64) two ? launch_tc<64, 2>(p, s) : launch_tc<64, 1>(p, s);
    else launch_tc<128, 1>(p, s);
  } else if (t == FType::BF16) {
    dispatch_scalar<bf16>(p, s);
  } else {
    dispatch_scalar<float>(p, s);
  }
  launch_sinks(t, p, a.dsinks, s);
}

}  // namespace remat::kernels
