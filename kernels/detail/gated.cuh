// The gated MLP activations' kernels (SwiGLU, GeGLU): gu is [rows, 2F] (gate | up) and
// y = Act::y(gate) * up is [rows, F]; the backward writes dgu (acc: +=). Act gives y(g) and
// grad(g, u, dy, dg, du); an Act with its own constants (the clamped SwiGLU's limit) gives
// out(g, u) (the output from both halves) instead of y(g), and is passed by value.
// Device-only header (.cu files); each op's file holds its Act.
#pragma once
#include <cstdint>

#include "kernels/detail/device_utils.cuh"

namespace remat::kernels::detail {

template <class T, class Act>
struct GatedFwd {
  const T* gu;
  T* y;
  int F;
  Act act;
  template <int V>
  __device__ void run(std::int64_t i) const {
    const std::int64_t r = i / F, c = i % F;
    const T* g = gu + r * 2 * F + c;
    float a[V], u[V], o[V];
    load_vec<V>(g, a);
    load_vec<V>(g + F, u);
#pragma unroll
    for (int k = 0; k < V; ++k) o[k] = act.out(a[k], u[k]);
    store_vec<V>(y + i, o);
  }
};

template <class T, class Act>
struct GatedBwd {
  const T* gu;
  const T* dy;
  T* dgu;
  int F;
  bool acc;
  Act act;
  template <int V>
  __device__ void run(std::int64_t i) const {
    const std::int64_t r = i / F, c = i % F;
    const std::int64_t ig = r * 2 * F + c, iu = ig + F;
    float a[V], u[V], d[V], og[V], ou[V], pg[V], pu[V];
    load_vec<V>(gu + ig, a);
    load_vec<V>(gu + iu, u);
    load_vec<V>(dy + i, d);
    if (acc) {
      load_vec<V>(dgu + ig, pg);
      load_vec<V>(dgu + iu, pu);
    }
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float dg, du;
      act.grad(a[k], u[k], d[k], dg, du);
      og[k] = acc ? pg[k] + dg : dg;
      ou[k] = acc ? pu[k] + du : du;
    }
    store_vec<V>(dgu + ig, og);
    store_vec<V>(dgu + iu, ou);
  }
};

template <class Act>
void gated_fwd(FType t, const void* gu, void* y, std::int64_t rows, int F, cudaStream_t s,
               const char* name, Act act = Act{}) {
  const std::int64_t n = rows * F;
  const int V = t == FType::BF16 ? 8 : 4;
  const bool vec = F % V == 0 && aligned_to(gu, 16) && aligned_to(y, 16);
  if (t == FType::BF16)
    ew_launch_vec<bf16>(
        GatedFwd<bf16, Act>{static_cast<const bf16*>(gu), static_cast<bf16*>(y), F, act}, vec, n, s,
        name);
  else
    ew_launch_vec<float>(
        GatedFwd<float, Act>{static_cast<const float*>(gu), static_cast<float*>(y), F, act}, vec, n, s,
        name);
}

template <class Act>
void gated_bwd(FType t, const void* gu, const void* dy, void* dgu, std::int64_t rows, int F,
               bool acc, cudaStream_t s, const char* name, Act act = Act{}) {
  const std::int64_t n = rows * F;
  const int V = t == FType::BF16 ? 8 : 4;
  const bool vec = F % V == 0 && aligned_to(gu, 16) && aligned_to(dy, 16) && aligned_to(dgu, 16);
  if (t == FType::BF16)
    ew_launch_vec<bf16>(GatedBwd<bf16, Act>{static_cast<const bf16*>(gu),
                                           static_cast<const bf16*>(dy), static_cast<bf16*>(dgu),
                                           F, acc, act},
                       vec, n, s, name);
  else
    ew_launch_vec<float>(GatedBwd<float, Act>{static_cast<const float*>(gu),
                                             static_cast<const float*>(dy),
                                             static_cast<float*>(dgu), F, acc, act},
                        vec, n, s, name);
}

}  // namespace remat::kernels::detail
