#include "kernels/attn_probs.cuh"

#include <cmath>

#include "core/util/error.h"
#include "kernels/detail/attn_tile.cuh"
#include "kernels/detail/device_utils.cuh"
#include "kernels/detail/mma.cuh"
#include "kernels/detail/tile_load.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

struct ProbsDev {
  const bf16* qkv;
  bf16* probs;
  int S, heads, group, width;
  int pairs;  // S even and probs 4-byte aligned: bf16 pairs stored as one 32-bit word
  ScoreMap map;
};

// 4 warps x 16 query rows = 64 rows per block, key tiles of 64 double-buffered with cp.async
// (tile kt of pass 1 and of pass 2 is the same load sequence, run twice).
template <int D>
struct ProbsTc {
  static constexpr int BM = 64, BN = 64, LD = D + 8;
  static constexpr int smem_bytes() { return (BM + 2 * BN) * LD * 2; }
};

template <int D>
__global__ void __launch_bounds__(128) attn_probs_tc(ProbsDev p) {
  using C = ProbsTc<D>;
  constexpr int BM = C::BM, BN = C::BN, LD = C::LD;
  extern __shared__ __align__(16) unsigned char smraw[];
  bf16* Qs = reinterpret_cast<bf16*>(smraw);
  bf16* Ks = Qs + BM * LD;  // [2][BN][LD]
  const int S = p.S, W = p.width;
  const int qt = gridDim.x - 1 - blockIdx.x;  // longest rows first
  const int h = blockIdx.y, b = blockIdx.z, g = h / p.group;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, tq = lane & 3;
  const int q0 = qt * BM;
  const bf16* base = p.qkv + static_cast<std::int64_t>(b) * S * W;
  const bf16* ksrc = base + (p.heads + g) * D;
  const int last_row = min(q0 + BM - 1, S - 1);
  const TileRange tiles = band_key_tiles(p.map.window, q0, last_row, BN);
  const int kt0 = tiles.first, n_kt = tiles.end - tiles.first;  // key tiles visited per pass
  const int total = 2 * n_kt;  // pass 1, then pass 2
  bf16* out = p.probs + (static_cast<std::int64_t>(b) * p.heads + h) * S * static_cast<std::int64_t>(S);

  load_rows<D>(Qs, base + h * D, q0, BM, S, W, tid);
  load_rows<D>(Ks, ksrc, kt0 * BN, BN, S, W, tid);
  cp_async_commit();

  std::uint32_t qf[D / 16][4];
  float m_r[2] = {-INFINITY, -INFINITY}, l_r[2] = {0.0f, 0.0f}, lse_r[2] = {0.0f, 0.0f};
  const int row_a = q0 + warp * 16 + (lane >> 2);

  for (int it = 0; it < total; ++it) {
    if (it + 1 < total) {
      load_rows<D>(Ks + ((it + 1) & 1) * BN * LD, ksrc, (kt0 + (it + 1) % n_kt) * BN, BN, S, W,
                   tid);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (it == 0) load_q_frags<D, LD>(qf, Qs, warp, lane);
    const bool second = it >= n_kt;
    const int kt = kt0 + (second ? it - n_kt : it);
    const int key0 = kt * BN;
    float s[BN / 8][4];
    qk_tile<D, BN, LD>(s, qf, Ks + (it & 1) * BN * LD, lane);
    const bool need_mask = tile_needs_mask(key0, BN, q0 + warp * 16, S, p.map.window);
    scale_mask_tile<BN>(s, p.map, key0, row_a, tq, S, need_mask);

    if (!second) {
      // Pass 1: running max and sum of 2^(v - max) per row (a quad of lanes shares a row).
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
          mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m_r[r], mx);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
          sum += exp2f(s[nt][2 * r] - m_use) + exp2f(s[nt][2 * r + 1] - m_use);
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        l_r[r] = l_r[r] * exp2f(m_r[r] - m_use) + sum;
        m_r[r] = m_new;
      }
      if (it == n_kt - 1) {
#pragma unroll
        for (int r = 0; r < 2; ++r) lse_r[r] = m_r[r] + log2f(l_r[r]);
      }
    } else {
      // Pass 2: the probabilities 2^(v - lse), stored as bf16 pairs (masked entries are 0).
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row_a + r * 8;
        if (row >= S) continue;
        bf16* orow = out + static_cast<std::int64_t>(row) * S;
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt) {
          const int key = key0 + nt * 8 + tq * 2;
          if (key >= S) continue;
          const float p0 = exp2f(s[nt][2 * r] - lse_r[r]);
          const float p1 = exp2f(s[nt][2 * r + 1] - lse_r[r]);
          if (p.pairs && key + 1 < S) {
            *reinterpret_cast<std::uint32_t*>(orow + key) = pack_bf16x2(p0, p1);
          } else {
            orow[key] = from_f<bf16>(p0);
            if (key + 1 < S) orow[key + 1] = from_f<bf16>(p1);
          }
        }
      }
    }
    __syncthreads();
  }

  // Zeros right of the last key tile (every key there is above the diagonal of these rows) and
  // left of the first (every key there is left of their bands).
  const int nrows = last_row - q0 + 1;
  const int c0 = (kt0 + n_kt) * BN;
  if (c0 < S) {
    const int ncols = S - c0;
    for (int idx = tid; idx < nrows * ncols; idx += 128) {
      const int r = idx / ncols, c = idx % ncols;
      out[static_cast<std::int64_t>(q0 + r) * S + c0 + c] = from_f<bf16>(0.0f);
    }
  }
  const int left = kt0 * BN;
  for (int idx = tid; idx < nrows * left; idx += 128) {
    const int r = idx / left, c = idx % left;
    out[static_cast<std::int64_t>(q0 + r) * S + c] = from_f<bf16>(0.0f);
  }
}

template <int D>
void launch(const ProbsDev& p, int B, cudaStream_t s) {
  using C = ProbsTc<D>;
  const int smem = C::smem_bytes();
  auto kernel = attn_probs_tc<D>;
  if (smem > 48 * 1024) set_smem_limit(reinterpret_cast<const void*>(kernel), smem, "attn_probs");
  dim3 grid(static_cast<unsigned>((p.S + C::BM - 1) / C::BM), static_cast<unsigned>(p.heads),
            static_cast<unsigned>(B));
  kernel<<<grid, 128, smem, s>>>(p);
  check_launch("attn_probs");
}

}  // namespace

bool attn_probs_supported(FType t, int d, std::int64_t width, const void* qkv) {
  return t == FType::BF16 && (d == 32 || d == 64 || d == 128) && width % 8 == 0 &&
         aligned_to(qkv, 16);
}

void attn_probs_fwd(FType t, const void* qkv, void* probs, int B, int S, int heads, int kv_heads,
                    int d, int dv, float scale, int window, float softcap, cudaStream_t s) {
  if (B <= 0 || S <= 0 || heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0 || dv <= 0)
    throw Error("attn_probs: bad dims B=" + std::to_string(B) + " S=" + std::to_string(S) +
                " heads=" + std::to_string(heads) + " kv_heads=" + std::to_string(kv_heads) +
                " dv=" + std::to_string(dv));
  const std::int64_t width = static_cast<std::int64_t>(heads + kv_heads) * d +
                             static_cast<std::int64_t>(kv_heads) * dv;  // AttnDims::qkv_width
  if (!attn_probs_supported(t, d, width, qkv))
    throw Error("attn_probs: needs bf16, d in {32, 64, 128}, a 16-byte aligned qkv and rows of a "
                "multiple of 8 elements (d=" + std::to_string(d) + ", width=" +
                std::to_string(width) + ")");
  ProbsDev p;
  p.qkv = static_cast<const bf16*>(qkv);
  p.probs = static_cast<bf16*>(probs);
  p.S = S;
  p.heads = heads;
  p.group = heads / kv_heads;
  p.width = static_cast<int>(width);
  p.pairs = S % 2 == 0 && aligned_to(probs, 4);
  p.map.scale_log2 = scale * kLog2e;
  p.map.scale = scale;
  p.map.softcap = softcap;
  p.map.window = band_within(window, S);
  if (d == 32) launch<32>(p, B, s);
  else if (d == 64) launch<64>(p, B, s);
  else launch<128>(p, B, s);
}

}  // namespace remat::kernels
