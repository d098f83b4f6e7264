#include "kernels/cast.cuh"

#include <string>

#include "core/util/error.h"
#include "kernels/detail/device_utils.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

template <class TD, class TS>
struct Cast {
  TD* dst;
  const TS* src;
  template <int V>
  __device__ void run(std::int64_t i) const {
    float a[V];
    load_vec<V>(src + i, a);
    store_vec<V>(dst + i, a);
  }
};

template <class TD, class TS>
void run_cast(void* dst, const void* src, std::int64_t n, cudaStream_t s) {
  Cast<TD, TS> f{static_cast<TD*>(dst), static_cast<const TS*>(src)};
  if (aligned_to(dst, 16) && aligned_to(src, 16)) ew_launch<4>(f, n, s, "cast");
  else ew_launch<1>(f, n, s, "cast");
}

}  // namespace

void cast(FType dst_t, void* dst, FType src_t, const void* src, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  if (dst_t == src_t) {
    const std::size_t bytes = static_cast<std::size_t>(n) * (dst_t == FType::BF16 ? 2 : 4);
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
    if (e != cudaSuccess)
      throw Error(std::string("cast: cudaMemcpyAsync: ") + cudaGetErrorString(e));
    return;
  }
  if (dst_t == FType::BF16) run_cast<bf16, float>(dst, src, n, s);
  else run_cast<float, bf16>(dst, src, n, s);
}

}  // namespace remat::kernels
