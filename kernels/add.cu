#include "kernels/add.cuh"

#include "kernels/detail/device_utils.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

template <class TD, class TS>
struct AddInto {
  TD* dst;
  const TS* src;
  template <int V>
  __device__ void run(std::int64_t i) const {
    float a[V], b[V];
    load_vec<V>(dst + i, a);
    load_vec<V>(src + i, b);
#pragma unroll
    for (int k = 0; k < V; ++k) a[k] += b[k];
    store_vec<V>(dst + i, a);
  }
};

template <class TD, class TS>
void run_add(void* dst, const void* src, std::int64_t n, cudaStream_t s) {
  AddInto<TD, TS> f{static_cast<TD*>(dst), static_cast<const TS*>(src)};
  if (aligned_to(dst, 16) && aligned_to(src, 16)) ew_launch<4>(f, n, s, "add_into");
  else ew_launch<1>(f, n, s, "add_into");
}

template <class T>
struct AddBias {
  T* y;
  const T* bias;
  int m;
  template <int V>
  __device__ void run(std::int64_t i) const {
    float a[V];
    load_vec<V>(y + i, a);
#pragma unroll
    for (int k = 0; k < V; ++k) a[k] += to_f(bias[(i + k) % m]);
    store_vec<V>(y + i, a);
  }
};

}  // namespace

void add_bias_cols(FType t, void* y, const void* bias, std::int64_t n, int m, cudaStream_t s) {
  const std::int64_t total = n * m;
  if (t == FType::BF16)
    ew_launch<1>(AddBias<bf16>{static_cast<bf16*>(y), static_cast<const bf16*>(bias), m}, total, s,
                 "add_bias_cols");
  else
    ew_launch<1>(AddBias<float>{static_cast<float*>(y), static_cast<const float*>(bias), m}, total,
                 s, "add_bias_cols");
}

void add_into(FType dst_t, void* dst, FType src_t, const void* src, std::int64_t n,
              cudaStream_t s) {
  if (dst_t == FType::BF16) {
    if (src_t == FType::BF16) run_add<bf16, bf16>(dst, src, n, s);
    else run_add<bf16, float>(dst, src, n, s);
  } else {
    if (src_t == FType::BF16) run_add<float, bf16>(dst, src, n, s);
    else run_add<float, float>(dst, src, n, s);
  }
}

}  // namespace remat::kernels
