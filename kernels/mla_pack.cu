// Multi-head latent attention's packing kernels (mla_pack.cuh): one block per token row, its
// threads over the row's output columns, each column computed from its own sources (no shared
// memory, no atomics). The arithmetic is the CPU backend's (core/backend/cpu/cpu_mla.cpp)
// through the same helpers (core/backend/mla_pack.h), term for term and in the same order.
#include "kernels/mla_pack.cuh"

#include <climits>
#include <string>

#include "core/util/error.h"
#include "kernels/detail/device_utils.cuh"

namespace remat::kernels {
namespace {

using detail::bf16;
using detail::from_f;
using detail::to_f;

constexpr int kThreads = 256;

template <class T>
__device__ __forceinline__ void put(T* p, float v, bool acc) {
  *p = from_f<T>(acc ? to_f(*p) + v : v);
}

// out row t: q heads (d - r copied, then r rotated from q's adjacent pairs), k heads (d - r
// copied from kv, then k_pe rotated, the same for every head), value heads (dv from kv).
template <class T>
__global__ void __launch_bounds__(kThreads)
    mla_pack_fwd_kernel(const T* __restrict__ q, const T* __restrict__ kv,
                        const T* __restrict__ kpe, T* __restrict__ out, MlaPackDims m,
                        const float* __restrict__ cs, const float* __restrict__ sn) {
  const std::int64_t t = blockIdx.x;
  const int d = m.d, dn = m.nope(), half = m.r / 2, kvh = m.kv_head();
  const int qk = m.heads * d, width = static_cast<int>(m.out_width());
  const T* qr = q + t * m.q_width();
  const T* kvr = kv + t * m.kv_width();
  const T* pr = kpe + t * m.r;
  T* o = out + t * m.out_width();
  const std::int64_t trow = (t % m.S) * half;
  for (int col = threadIdx.x; col < width; col += blockDim.x) {
    float v;
    if (col < 2 * qk) {
      const bool is_k = col >= qk;
      const int hc = is_k ? col - qk : col, h = hc / d, j = hc % d;
      if (j < dn) {
        v = to_f(is_k ? kvr[h * kvh + j] : qr[h * d + j]);
      } else {
        const int jr = j - dn, i = jr < half ? jr : jr - half;
        const T* x = is_k ? pr : qr + h * d + dn;  // the rotated part's source
        float a, b;
        mla_rotate(to_f(x[2 * i]), to_f(x[2 * i + 1]), cs[trow + i], sn[trow + i], a, b);
        v = jr < half ? a : b;
      }
    } else {
      const int cv = col - 2 * qk, h = cv / m.dv, j = cv % m.dv;
      v = to_f(kvr[h * kvh + dn + j]);
    }
    o[col] = from_f<T>(v);
  }
}

// Row t of dq, dkv and dk_pe from the packed row's gradient g: the copies back, the inverse
// rotation of each q head's pairs, and of the k heads' rotated parts summed over the heads
// (head 0 first, as the CPU).
template <class T>
__global__ void __launch_bounds__(kThreads)
    mla_pack_bwd_kernel(const T* __restrict__ dout, T* __restrict__ dq, T* __restrict__ dkv,
                        T* __restrict__ dpe, MlaPackDims m, const float* __restrict__ cs,
                        const float* __restrict__ sn, bool acc_q, bool acc_kv, bool acc_pe) {
  const std::int64_t t = blockIdx.x;
  const int d = m.d, dn = m.nope(), half = m.r / 2, kvh = m.kv_head();
  const T* g = dout + t * m.out_width();
  const std::int64_t trow = (t % m.S) * half;
  T* dqr = dq + t * m.q_width();
  const int qw = static_cast<int>(m.q_width());
  for (int col = threadIdx.x; col < qw; col += blockDim.x) {
    const int h = col / d, j = col % d;
    const T* gq = g + m.q_col(h);
    float v;
    if (j < dn) {
      v = to_f(gq[j]);
    } else {
      const int jr = j - dn, i = jr / 2;
      float g1, g2;
      mla_unrotate(to_f(gq[dn + i]), to_f(gq[dn + half + i]), cs[trow + i], sn[trow + i], g1, g2);
      v = jr % 2 == 0 ? g1 : g2;
    }
    put(dqr + col, v, acc_q);
  }
  T* dkvr = dkv + t * m.kv_width();
  const int kw = static_cast<int>(m.kv_width());
  for (int col = threadIdx.x; col < kw; col += blockDim.x) {
    const int h = col / kvh, j = col % kvh;
    const float v = to_f(j < dn ? g[m.k_col(h) + j] : g[m.v_col(h) + (j - dn)]);
    put(dkvr + col, v, acc_kv);
  }
  T* dper = dpe + t * m.r;
  for (int j = threadIdx.x; j < m.r; j += blockDim.x) {
    const int i = j / 2;
    float ga = 0.0f, gb = 0.0f;
    for (int h = 0; h < m.heads; ++h) {
      const T* gk = g + m.k_col(h) + dn;
      ga += to_f(gk[i]);
      gb += to_f(gk[half + i]);
    }
    float g1, g2;
    mla_unrotate(ga, gb, cs[trow + i], sn[trow + i], g1, g2);
    put(dper + j, j % 2 == 0 ? g1 : g2, acc_pe);
  }
}

void check_sizes(const MlaPackDims& m, const char* op) {
  if (m.out_width() > INT_MAX || m.kv_width() > INT_MAX || m.rows > INT_MAX)
    throw Error(std::string(op) + ": " + std::to_string(m.rows) + " rows of " +
                std::to_string(m.out_width()) + " columns are more than one launch covers");
}

}  // namespace

void mla_pack_fwd(FType t, const void* q, const void* kv, const void* kpe, void* out,
                  const MlaPackDims& m, const float* cs, const float* sn, cudaStream_t s) {
  check_sizes(m, "mla_pack_fwd");
  if (m.rows <= 0) return;
  const unsigned blocks = static_cast<unsigned>(m.rows);
  if (t == FType::BF16)
    mla_pack_fwd_kernel<bf16><<<blocks, kThreads, 0, s>>>(
        static_cast<const bf16*>(q), static_cast<const bf16*>(kv), static_cast<const bf16*>(kpe),
        static_cast<bf16*>(out), m, cs, sn);
  else
    mla_pack_fwd_kernel<float><<<blocks, kThreads, 0, s>>>(
        static_cast<const float*>(q), static_cast<const float*>(kv),
        static_cast<const float*>(kpe), static_cast<float*>(out), m, cs, sn);
  check_launch("mla_pack_fwd");
}

void mla_pack_bwd(FType t, const void* dout, void* dq, void* dkv, void* dpe, const MlaPackDims& m,
                  const float* cs, const float* sn, bool acc_q, bool acc_kv, bool acc_pe,
                  cudaStream_t s) {
  check_sizes(m, "mla_pack_bwd");
  if (m.rows <= 0) return;
  const unsigned blocks = static_cast<unsigned>(m.rows);
  if (t == FType::BF16)
    mla_pack_bwd_kernel<bf16><<<blocks, kThreads, 0, s>>>(
        static_cast<const bf16*>(dout), static_cast<bf16*>(dq), static_cast<bf16*>(dkv),
        static_cast<bf16*>(dpe), m, cs, sn, acc_q, acc_kv, acc_pe);
  else
    mla_pack_bwd_kernel<float><<<blocks, kThreads, 0, s>>>(
        static_cast<const float*>(dout), static_cast<float*>(dq), static_cast<float*>(dkv),
        static_cast<float*>(dpe), m, cs, sn, acc_q, acc_kv, acc_pe);
  check_launch("mla_pack_bwd");
}

}  // namespace remat::kernels
