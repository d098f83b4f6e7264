#include "kernels/gelu.cuh"

#include "core/util/gelu.h"
#include "kernels/detail/device_utils.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

// The two forms: y(x) and y'(x) (core/util/gelu.h, shared with the CPU backend).
struct Tanh {
  __device__ static float y(float v) { return gelu_tanh(v); }
  __device__ static float grad(float v) { return gelu_tanh_grad(v); }
};
struct Erf {
  __device__ static float y(float v) { return gelu_erf(v); }
  __device__ static float grad(float v) { return gelu_erf_grad(v); }
};

template <class T, class Form>
struct GeluFwd {
  const T* x;
  T* y;
  template <int V>
  __device__ void run(std::int64_t i) const {
    float a[V], o[V];
    load_vec<V>(x + i, a);
#pragma unroll
    for (int k = 0; k < V; ++k) o[k] = Form::y(a[k]);
    store_vec<V>(y + i, o);
  }
};

template <class T, class Form>
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
      const float r = g[k] * Form::grad(a[k]);
      o[k] = acc ? old[k] + r : r;
    }
    store_vec<V>(dx + i, o);
  }
};

template <class Form>
void fwd(FType t, const void* x, void* y, std::int64_t n, cudaStream_t s, const char* name) {
  const bool vec = aligned_to(x, 16) && aligned_to(y, 16);
  if (t == FType::BF16)
    ew_launch_vec<bf16>(GeluFwd<bf16, Form>{static_cast<const bf16*>(x), static_cast<bf16*>(y)}, vec, n,
                 s, name);
  else
    ew_launch_vec<float>(GeluFwd<float, Form>{static_cast<const float*>(x), static_cast<float*>(y)}, vec,
                  n, s, name);
}

template <class Form>
void bwd(FType t, const void* x, const void* dy, void* dx, std::int64_t n, bool acc,
         cudaStream_t s, const char* name) {
  const bool vec = aligned_to(x, 16) && aligned_to(dy, 16) && aligned_to(dx, 16);
  if (t == FType::BF16)
    ew_launch_vec<bf16>(GeluBwd<bf16, Form>{static_cast<const bf16*>(x), static_cast<const bf16*>(dy),
                                     static_cast<bf16*>(dx), acc},
                 vec, n, s, name);
  else
    ew_launch_vec<float>(GeluBwd<float, Form>{static_cast<const float*>(x),
                                       static_cast<const float*>(dy), static_cast<float*>(dx), acc},
                  vec, n, s, name);
}

}  // namespace

void gelu_fwd(FType t, const void* x, void* y, std::int64_t n, cudaStream_t s) {
  fwd<Tanh>(t, x, y, n, s, "gelu_fwd");
}

void gelu_bwd(FType t, const void* x, const void* dy, void* dx, std::int64_t n, bool acc,
              cudaStream_t s) {
  bwd<Tanh>(t, x, dy, dx, n, acc, s, "gelu_bwd");
}

void gelu_erf_fwd(FType t, const void* x, void* y, std::int64_t n, cudaStream_t s) {
  fwd<Erf>(t, x, y, n, s, "gelu_erf_fwd");
}

void gelu_erf_bwd(FType t, const void* x, const void* dy, void* dx, std::int64_t n, bool acc,
                  cudaStream_t s) {
  bwd<Erf>(t, x, dy, dx, n, acc, s, "gelu_erf_bwd");
}

}  // namespace remat::kernels
