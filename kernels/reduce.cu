#include "kernels/reduce.cuh"

#include "kernels/detail/device_utils.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

template <class T>
__global__ void __launch_bounds__(256)
    colsum_partial(const T* __restrict__ in, float* __restrict__ part, std::int64_t rows, int cols,
                   std::int64_t rows_per_chunk) {
  __shared__ float sm[8][33];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int c = blockIdx.x * 32 + tx;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * rows_per_chunk;
  std::int64_t r1 = r0 + rows_per_chunk;
  if (r1 > rows) r1 = rows;
  float s = 0.0f;
  if (c < cols) {
#pragma unroll 8
    for (std::int64_t r = r0 + ty; r < r1; r += 8) s += to_f(in[r * cols + c]);
  }
  sm[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && c < cols) {
    float t = sm[0][tx];
#pragma unroll
    for (int k = 1; k < 8; ++k) t += sm[k][tx];
    part[static_cast<std::int64_t>(blockIdx.y) * cols + c] = t;
  }
}

template <class TO>
__global__ void __launch_bounds__(256)
    colsum_final(const float* __restrict__ part, TO* __restrict__ out, int chunks, int cols,
                 bool acc) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
#pragma unroll 16
  for (int k = 0; k < chunks; ++k) s += part[static_cast<std::int64_t>(k) * cols + c];
  out[c] = from_f<TO>(acc ? to_f(out[c]) + s : s);
}

}  // namespace

void colsum(FType in_t, const void* in, FType out_t, void* out, std::int64_t rows, int cols,
            bool acc, float* scratch, cudaStream_t s) {
  if (cols <= 0) return;
  const int chunks = colsum_chunks(rows);
  const std::int64_t rpc = (rows + chunks - 1) / chunks;
  dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(chunks));
  if (in_t == FType::BF16)
    colsum_partial<<<grid, 256, 0, s>>>(static_cast<const bf16*>(in), scratch, rows, cols, rpc);
  else
    colsum_partial<<<grid, 256, 0, s>>>(static_cast<const float*>(in), scratch, rows, cols, rpc);
  check_launch("colsum_partial");
  const unsigned g2 = static_cast<unsigned>((cols + 255) / 256);
  if (out_t == FType::BF16)
    colsum_final<<<g2, 256, 0, s>>>(scratch, static_cast<bf16*>(out), chunks, cols, acc);
  else
    colsum_final<<<g2, 256, 0, s>>>(scratch, static_cast<float*>(out), chunks, cols, acc);
  check_launch("colsum_final");
}

}  // namespace remat::kernels
