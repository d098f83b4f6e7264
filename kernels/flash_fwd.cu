// Flash attention forward: scalar kernel (any dtype, head dim and value width <= 256) and
// tensor-core kernel (bf16, d in {32, 64, 128}, value width d); both visit only the key tiles
// that meet the band (window) and mask the rest of a tile like the causal mask (attn_band.h).
#include <algorithm>
#include <mutex>

#include "kernels/detail/attn_tile.cuh"
#include "kernels/detail/flash_common.cuh"
#include "kernels/detail/mma.cuh"
#include "kernels/detail/tile_load.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

// ---------------------------------------------------------------------------------------------
// Scalar forward: 8 warps, one query row per warp, keys in tiles of 32 staged in shared memory
// as fp32. Lane j scores key j of the tile; output columns lane + 32k (k < DK, dv <= 32 DK) live
// in registers.
// ---------------------------------------------------------------------------------------------
template <class T, int DK>
__global__ void __launch_bounds__(256) flash_fwd_scalar(FlashDev p) {
  extern __shared__ float sm[];
  const int d = p.d, dv = p.dv, ld = d + 1, ldv = dv + 1, dm = max(d, dv);
  float* Ks = sm;             // [32][ld]
  float* Vs = Ks + 32 * ld;   // [32][ldv]
  float* Qs = Vs + 32 * ldv;  // [8][d]
  const int qb = gridDim.x - 1 - blockIdx.x;  // longest rows first
  const int h = blockIdx.y, b = blockIdx.z, g = h / p.group;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int S = p.S, W = p.width;
  const int q0 = qb * 8, qi = q0 + warp;
  const T* qkv = static_cast<const T*>(p.qkv);
  const std::int64_t brow = static_cast<std::int64_t>(b) * S;
  const int kcol = (p.heads + g) * d, vcol = (p.heads + p.kv_heads) * d + g * dv;
  for (int idx = threadIdx.x; idx < 8 * d; idx += blockDim.x) {
    const int r = idx / d, c = idx % d, row = q0 + r;
    Qs[idx] = row < S ? to_f(qkv[(brow + row) * W + h * d + c]) : 0.0f;
  }
  float o[DK];
#pragma unroll
  for (int k = 0; k < DK; ++k) o[k] = 0.0f;
  // A sink: the row's running max starts at it and its running sum at exp(0).
  float m = p.sinks ? to_f(static_cast<const T*>(p.sinks)[h]) : -INFINITY;
  float l = p.sinks ? 1.0f : 0.0f;
  const TileRange tiles = band_key_tiles(p.window, q0, min(q0 + 7, S - 1), 32);
  const int fk = qi < S ? band_first_key(p.window, qi) : 0;  // this warp's row's first key
  for (int t = tiles.first; t < tiles.end; ++t) {
    const int k0 = t * 32;
    __syncthreads();
    for (int idx = threadIdx.x; idx < 32 * dm; idx += blockDim.x) {
      const int r = idx / dm, c = idx % dm, key = k0 + r;
      const bool ok = key < S;
      const std::int64_t base = (brow + (ok ? key : 0)) * W;
      if (c < d) Ks[r * ld + c] = ok ? to_f(qkv[base + kcol + c]) : 0.0f;
      if (c < dv) Vs[r * ldv + c] = ok ? to_f(qkv[base + vcol + c]) : 0.0f;
    }
    __syncthreads();
    if (qi < S && k0 <= qi && k0 + 31 >= fk) {  // the tile meets the row's band
      const int key = k0 + lane;
      const float* qrow = Qs + warp * d;
      const float* krow = Ks + lane * ld;
      float s = 0.0f;
      for (int c = 0; c < d; ++c) s += qrow[c] * krow[c];
      s = capped_score(s * p.scale, p.softcap);
      const bool valid = key <= qi && key >= fk;
      s = valid ? s : -INFINITY;
      const float mnew = fmaxf(m, warp_max(s));
      const float alpha = expf(m - mnew);
      const float e = valid ? expf(s - mnew) : 0.0f;
      l = l * alpha + warp_sum(e);
      float pd = e;
      if (p.dropout && valid)
        pd = keep_one(p.key, prob_index(p, b, h, qi, key), p.thr) ? e * p.keep_scale : 0.0f;
#pragma unroll
      for (int k = 0; k < DK; ++k) o[k] *= alpha;
      const int nj = min(32, qi - k0 + 1);
      for (int jj = 0; jj < nj; ++jj) {
        const float pj = __shfl_sync(0xffffffffu, pd, jj);
        const float* vrow = Vs + jj * ldv;
#pragma unroll
        for (int k = 0; k < DK; ++k) {
          const int c = lane + 32 * k;
          if (c < dv) o[k] += pj * vrow[c];
        }
      }
      m = mnew;
    }
  }
  if (qi < S) {
    T* out = static_cast<T*>(p.ctx) + (brow + qi) * p.ctx_width + h * dv;
#pragma unroll
    for (int k = 0; k < DK; ++k) {
      const int c = lane + 32 * k;
      if (c < dv) out[c] = from_f<T>(o[k] / l);
    }
    if (lane == 0) p.lse[(static_cast<std::int64_t>(b) * p.heads + h) * S + qi] = m + logf(l);
  }
}

// ---------------------------------------------------------------------------------------------
// Tensor-core forward (bf16; value heads d wide, as flash_tc_supported requires): 4 warps, each
// with MT groups of 16 query rows (64 MT rows per block), key tiles of 64 double-buffered with
// cp.async. S = Q K^T and O += P V with mma m16n8k16, each K and V fragment shared by the
// warp's MT groups; the online softmax runs on the accumulators in the exp2 domain (scores
// pre-scaled by scale * log2 e, or soft-capped). Only key tiles that meet the block's band are
// visited. Every row sees the same key tiles of its band in the same order whatever MT is (a
// tile wholly outside a row's band leaves its running max, sum and output unchanged bit for
// bit), so MT = 1 and MT = 2 give the same bits.
// ---------------------------------------------------------------------------------------------
template <int D, int MT>
struct FwdTc {
  static constexpr int BM = 64 * MT, BN = 64, LD = D + 8;
  static constexpr int smem_bytes() { return (BM + 4 * BN) * LD * 2; }
};

template <int D, int MT>
__global__ void __launch_bounds__(128) flash_fwd_tc(FlashDev p) {
  using C = FwdTc<D, MT>;
  constexpr int BM = C::BM, BN = C::BN, LD = C::LD;
  extern __shared__ __align__(16) unsigned char smraw[];
  bf16* Qs = reinterpret_cast<bf16*>(smraw);
  bf16* Ks = Qs + BM * LD;
  bf16* Vs = Ks + 2 * BN * LD;
  const int S = p.S, W = p.width;
  const int qt = gridDim.x - 1 - blockIdx.x;
  const int h = blockIdx.y, b = blockIdx.z, g = h / p.group;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int q0 = qt * BM;
  const bf16* base = static_cast<const bf16*>(p.qkv) + static_cast<std::int64_t>(b) * S * W;
  const bf16* qsrc = base + h * D;
  const bf16* ksrc = base + (p.heads + g) * D;
  const bf16* vsrc = base + (p.heads + p.kv_heads + g) * D;
  const TileRange tiles = band_key_tiles(p.window, q0, min(q0 + BM - 1, S - 1), BN);
  const int kt0 = tiles.first, n_kt = tiles.end;
  const ScoreMap sm = score_map(p);

  load_rows<D>(Qs, qsrc, q0, BM, S, W, tid, 128);
  load_rows<D>(Ks + (kt0 & 1) * BN * LD, ksrc, kt0 * BN, BN, S, W, tid, 128);
  load_rows<D>(Vs + (kt0 & 1) * BN * LD, vsrc, kt0 * BN, BN, S, W, tid, 128);
  cp_async_commit();

  float o[MT][D / 8][4];
  float m_r[MT][2], l_r[MT][2];
  int row_a[MT];
#pragma unroll
  for (int t = 0; t < MT; ++t) {
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[t][i][e] = 0.0f;
    m_r[t][0] = m_r[t][1] = -INFINITY;
    l_r[t][0] = l_r[t][1] = 0.0f;
    row_a[t] = q0 + (warp * MT + t) * 16 + (lane >> 2);
  }
  if (p.sinks) {  // the running max (exp2 domain) starts at the sink, the running sum at 1
    const float sink2 = to_f(static_cast<const bf16*>(p.sinks)[h]) * kLog2e;
#pragma unroll
    for (int t = 0; t < MT; ++t) {
      m_r[t][0] = m_r[t][1] = sink2;
      l_r[t][0] = l_r[t][1] = 1.0f;
    }
  }
  std::uint32_t qf[MT][D / 16][4];
  const int tq = lane & 3;

  for (int kt = kt0; kt < n_kt; ++kt) {
    if (kt + 1 < n_kt) {
      const int st = (kt + 1) & 1;
      load_rows<D>(Ks + st * BN * LD, ksrc, (kt + 1) * BN, BN, S, W, tid, 128);
      load_rows<D>(Vs + st * BN * LD, vsrc, (kt + 1) * BN, BN, S, W, tid, 128);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (kt == kt0) {
#pragma unroll
      for (int t = 0; t < MT; ++t) load_q_frags<D, LD>(qf[t], Qs, warp * MT + t, lane);
    }
    const bf16* Kst = Ks + (kt & 1) * BN * LD;
    const bf16* Vst = Vs + (kt & 1) * BN * LD;

    float s[MT][BN / 8][4];
    qk_tiles<D, BN, LD, MT>(s, qf, Kst, lane);
    const int key0 = kt * BN;
#pragma unroll
    for (int t = 0; t < MT; ++t) {
      const bool need_mask = tile_needs_mask(key0, BN, q0 + (warp * MT + t) * 16, S, p.window);
      scale_mask_tile<BN>(s[t], sm, key0, row_a[t], tq, S, need_mask);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
          mx = fmaxf(mx, fmaxf(s[t][nt][2 * r], s[t][nt][2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m_r[t][r], mx);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        const float alpha = exp2f(m_r[t][r] - m_use);
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
          for (int e = 2 * r; e < 2 * r + 2; ++e) {
            const float pv = exp2f(s[t][nt][e] - m_use);
            s[t][nt][e] = pv;
            sum += pv;
          }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        l_r[t][r] = l_r[t][r] * alpha + sum;
        m_r[t][r] = m_new;
#pragma unroll
        for (int dn = 0; dn < D / 8; ++dn) {
          o[t][dn][2 * r] *= alpha;
          o[t][dn][2 * r + 1] *= alpha;
        }
      }
      if (p.dropout) {
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int row = row_a[t] + r * 8;
            const int key = key0 + nt * 8 + tq * 2;
            if (row < S && key < S) {
              bool k0, k1;
              keep_pair(p.key, prob_index(p, b, h, row, key), p.thr, k0, k1);
              s[t][nt][2 * r] = k0 ? s[t][nt][2 * r] * p.keep_scale : 0.0f;
              s[t][nt][2 * r + 1] = k1 ? s[t][nt][2 * r + 1] * p.keep_scale : 0.0f;
            }
          }
      }
    }
    pv_tiles<D, BN, LD, MT>(o, s, Vst, lane);
    __syncthreads();
  }

  bf16* ctx = static_cast<bf16*>(p.ctx);
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row_a[t] + r * 8;
      if (row >= S) continue;
      const float inv = 1.0f / l_r[t][r];
      bf16* out = ctx + (static_cast<std::int64_t>(b) * S + row) * p.ctx_width + h * D;
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) {
        const int c = dn * 8 + tq * 2;
        *reinterpret_cast<std::uint32_t*>(out + c) =
            pack_bf16x2(o[t][dn][2 * r] * inv, o[t][dn][2 * r + 1] * inv);
      }
      if (tq == 0)
        p.lse[(static_cast<std::int64_t>(b) * p.heads + h) * S + row] =
            (m_r[t][r] + log2f(l_r[t][r])) * kLn2;
    }
}

template <class T, int DK>
void launch_scalar(const FlashDev& p, cudaStream_t s) {
  const int smem = (32 * (p.d + 1) + 32 * (p.dv + 1) + 8 * p.d) * 4;
  auto kernel = flash_fwd_scalar<T, DK>;
  if (smem > 48 * 1024)
    set_smem_limit(reinterpret_cast<const void*>(kernel), smem, "flash_fwd_scalar");
  dim3 grid(static_cast<unsigned>((p.S + 7) / 8), static_cast<unsigned>(p.heads),
            static_cast<unsigned>(p.B));
  kernel<<<grid, 256, smem, s>>>(p);
  check_launch("flash_fwd_scalar");
}

// Registers for the output columns: DK = ceil(dv / 32), rounded up to a power of two.
template <class T>
void dispatch_scalar(const FlashDev& p, cudaStream_t s) {
  if (p.d > 256 || p.dv > 256)
    throw Error("flash_fwd: head dim " + std::to_string(p.d) + " or value width " +
                std::to_string(p.dv) + " above 256 is not supported");
  const int dk = (p.dv + 31) / 32;
  if (dk <= 1) launch_scalar<T, 1>(p, s);
  else if (dk <= 2) launch_scalar<T, 2>(p, s);
  else if (dk <= 4) launch_scalar<T, 4>(p, s);
  else launch_scalar<T, 8>(p, s);
}

template <int D, int MT>
void launch_tc(const FlashDev& p, cudaStream_t s) {
  using C = FwdTc<D, MT>;
  const int smem = C::smem_bytes();
  auto kernel = flash_fwd_tc<D, MT>;
  if (smem > 48 * 1024) set_smem_limit(reinterpret_cast<const void*>(kernel), smem, "flash_fwd_tc");
  dim3 grid(static_cast<unsigned>((p.S + C::BM - 1) / C::BM), static_cast<unsigned>(p.heads),
            static_cast<unsigned>(p.B));
  kernel<<<grid, 128, smem, s>>>(p);
  check_launch("flash_fwd_tc");
}

}  // namespace

bool flash_tc_supported(FType t, const FlashArgs& a, bool backward) {
  if (t != FType::BF16) return false;
  if (a.d != 32 && a.d != 64 && a.d != 128) return false;
  if (a.dv > 0 && a.dv != a.d) return false;  // value heads of their own width: the scalar path
  if (!aligned_to(a.qkv, 16) || !aligned_to(a.ctx, 16)) return false;
  if (backward && (!aligned_to(a.dctx, 16) || !aligned_to(a.dqkv, 16))) return false;
  return true;
}

void flash_fwd(FType t, const FlashArgs& a, FlashImpl impl, cudaStream_t s) {
  const FlashDev p = make_flash_dev(a);
  bool tc = impl != FlashImpl::Scalar && flash_tc_supported(t, a, false);
  if (impl == FlashImpl::TensorCore && !tc)
    throw Error("flash_fwd: the tensor-core path needs bf16, d in {32, 64, 128}, value heads d "
                "wide and 16-byte aligned tensors (d=" + std::to_string(a.d) + ", dv=" +
                std::to_string(a.dv > 0 ? a.dv : a.d) + ")");
  if (tc) {
    if (a.row_groups != 1 && a.row_groups != 2)
      throw Error("flash_fwd: row_groups must be 1 or 2, got " + std::to_string(a.row_groups));
    const bool two = a.row_groups == 2;  // d = 128 keeps one group (registers)
    if (a.d == 32) two ? launch_tc<32, 2>(p, s) : launch_tc<32, 1>(p, s);
    else if (a.d == 64) two ? launch_tc<64, 2>(p, s) : launch_tc<64, 1>(p, s);
    else launch_tc<128, 1>(p, s);
    return;
  }
  if (t == FType::BF16) dispatch_scalar<bf16>(p, s);
  else dispatch_scalar<float>(p, s);
}

}  // namespace remat::kernels
