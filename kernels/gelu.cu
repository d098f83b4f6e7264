#include "kernels/gelu.cuh"

#include "core/util/gelu.h"
#include "kernels/detail/device_utils.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

template <class T>
struct GeluFwd {
  const T* x;
  T* y;
  template <int V>
  __device__ void run(std::int64_t i) const {
    float a[V], o[V];
    load_vec<V>(x + i, a);
#pragma unroll
    for (int k = 0; k < V; ++k) o[k] = gelu_tanh(a[k]);
    store_vec<V>(y + i, o);
  }
};

template <class T>
struct GeluBwd {
  const T* x;
  const T* dy;
  T* dx;
  bool acc;
  template <int V>
  __device__ void run(std::int64_t i) const {
    float a[V], g[V], o[V], old[V];
    load_vec<V>(x + i, a);
    load_vec<V>(dy + i, g);
    if (acc) load_vec<V>(dx + i, old);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float r = g[k] * gelu_tanh_grad(a[k]);
      o[k] = acc ? old[k] + r : r;
    }
    store_vec<V>(dx + i, o);
  }
};

template <class T, class F>
void launch(const F& f, bool vec, std::int64_t n, cudaStream_t s, const char* name) {
  if (vec) ew_launch<16 / sizeof(T)>(f, n, s, name);
  else ew_launch<1>(f, n, s, name);
}

}  // namespace

void gelu_fwd(FType t, const void* x, void* y, std::int64_t n, cudaStream_t s) {
  const bool vec = aligned_to(x, 16) && aligned_to(y, 16);
  if (t == FType::BF16)
    launch<bf16>(GeluFwd<bf16>{static_cast<const bf16*>(x), static_cast<bf16*>(y)}, vec, n, s,
                 "gelu_fwd");
  else
    launch<float>(GeluFwd<float>{static_cast<const float*>(x), static_cast<float*>(y)}, vec, n, s,
                  "gelu_fwd");
}

void gelu_bwd(FType t, const void* x, const void* dy, void* dx, std::int64_t n, bool acc,
              cudaStream_t s) {
  const bool vec = aligned_to(x, 16) && aligned_to(dy, 16) && aligned_to(dx, 16);
  if (t == FType::BF16)
    launch<bf16>(GeluBwd<bf16>{static_cast<const bf16*>(x), static_cast<const bf16*>(dy),
                               static_cast<bf16*>(dx), acc},
                 vec, n, s, "gelu_bwd");
  else
    launch<float>(GeluBwd<float>{static_cast<const float*>(x), static_cast<const float*>(dy),
                                 static_cast<float*>(dx), acc},
                  vec, n, s, "gelu_bwd");
}

}  // namespace remat::kernels
