// Tile loads shared by the tensor-core attention kernels: rows of a head's slice of the packed
// qkv (or ctx) into shared memory with cp.async, rows past S zero-filled.
#pragma once
#include <cstdint>

#include "kernels/detail/device_utils.cuh"
#include "kernels/detail/mma.cuh"

namespace remat::kernels::detail {

// dst[r][0..D) (row pitch D + 8 elements) = src[(r0 + r) * stride + 0..D) for r < rows; zeros
// where r0 + r >= S. Threads tid of nthreads share the 16-byte chunks. Needs a commit/wait.
template <int D>
__device__ __forceinline__ void load_rows(bf16* dst, const bf16* src, int r0, int rows, int S,
                                          int stride, int tid, int nthreads = 128) {
  constexpr int CPR = D / 8;  // 16-byte chunks per row
  constexpr int LD = D + 8;
  for (int c = tid; c < rows * CPR; c += nthreads) {
    const int r = c / CPR, cc = (c % CPR) * 8;
    const int gr = r0 + r;
    const bool ok = gr < S;
    cp_async16(dst + r * LD + cc, src + static_cast<std::int64_t>(ok ? gr : 0) * stride + cc, ok);
  }
}

}  // namespace remat::kernels::detail
