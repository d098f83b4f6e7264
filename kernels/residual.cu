#include "kernels/residual.cuh"

#include "kernels/detail/device_utils.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

template <class T>
struct ResFwd {
  const T* res;
  const T* x;
  const std::uint8_t* mask;
  T* out;
  float scale;
  template <int V>
  __device__ void run(std::int64_t i) const {
    float r[V], a[V], m[V], o[V];
    load_vec<V>(res + i, r);
    load_vec<V>(x + i, a);
    if (mask) load_mask<V>(mask + i, m);
#pragma unroll
    for (int k = 0; k < V; ++k) o[k] = r[k] + a[k] * (mask ? (m[k] != 0.0f ? scale : 0.0f) : scale);
    store_vec<V>(out + i, o);
  }
};

template <class T>
struct ResBwd {
  const T* dout;
  const std::uint8_t* mask;
  T* dres;
  T* dx;
  float scale;
  bool acc_res, acc_x;
  template <int V>
  __device__ void run(std::int64_t i) const {
    float g[V], m[V], pr[V], px[V], orr[V], ox[V];
    load_vec<V>(dout + i, g);
    if (mask) load_mask<V>(mask + i, m);
    if (acc_res) load_vec<V>(dres + i, pr);
    if (acc_x) load_vec<V>(dx + i, px);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float vx = g[k] * (mask ? (m[k] != 0.0f ? scale : 0.0f) : scale);
      ox[k] = acc_x ? px[k] + vx : vx;
      orr[k] = acc_res ? pr[k] + g[k] : g[k];
    }
    store_vec<V>(dx + i, ox);
    store_vec<V>(dres + i, orr);
  }
};

}  // namespace

void residual_fwd(FType t, const void* res, const void* x, const std::uint8_t* mask, void* out,
                  float scale, std::int64_t n, cudaStream_t s) {
  const int V = t == FType::BF16 ? 8 : 4;
  const bool vec = aligned_to(res, 16) && aligned_to(x, 16) && aligned_to(out, 16) &&
                   (!mask || aligned_to(mask, V));
  if (t == FType::BF16)
    ew_launch_vec<bf16>(ResFwd<bf16>{static_cast<const bf16*>(res), static_cast<const bf16*>(x), mask,
                              static_cast<bf16*>(out), scale},
                 vec, n, s, "residual_fwd");
  else
    ew_launch_vec<float>(ResFwd<float>{static_cast<const float*>(res), static_cast<const float*>(x), mask,
                                static_cast<float*>(out), scale},
                  vec, n, s, "residual_fwd");
}

void residual_bwd(FType t, const void* dout, const std::uint8_t* mask, void* dres, void* dx,
                  float scale, std::int64_t n, bool acc_res, bool acc_x, cudaStream_t s) {
  const int V = t == FType::BF16 ? 8 : 4;
  const bool vec = aligned_to(dout, 16) && aligned_to(dres, 16) && aligned_to(dx, 16) &&
                   (!mask || aligned_to(mask, V));
  if (t == FType::BF16)
    ew_launch_vec<bf16>(ResBwd<bf16>{static_cast<const bf16*>(dout), mask, static_cast<bf16*>(dres),
                              static_cast<bf16*>(dx), scale, acc_res, acc_x},
                 vec, n, s, "residual_bwd");
  else
    ew_launch_vec<float>(ResBwd<float>{static_cast<const float*>(dout), mask, static_cast<float*>(dres),
                                static_cast<float*>(dx), scale, acc_res, acc_x},
                  vec, n, s, "residual_bwd");
}

}  // namespace remat::kernels
