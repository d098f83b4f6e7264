#include "kernels/rope.cuh"

#include <string>

#include "core/util/attn_temperature.h"
#include "core/util/error.h"
#include "kernels/detail/device_utils.cuh"

namespace remat::kernels {
namespace {

using namespace detail;

struct InvFreq {
  float v[kRopeMaxHalf];
};

// Angles in fp32 as Hugging Face (s * inv_freq rounded to fp32); cos and sin of that fp32 angle
// evaluated in double and rounded once, then times the attention scaling in fp32 (as the CPU
// backend: cos and sin scaled after).
__global__ void __launch_bounds__(256)
    rope_table_kernel(InvFreq f, int S, int half, float scaling, float* __restrict__ cs,
                      float* __restrict__ sn) {
  const std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<std::int64_t>(S) * half) return;
  const int s = static_cast<int>(idx / half), i = static_cast<int>(idx % half);
  const float ang = static_cast<float>(s) * f.v[i];
  double sd, cd;
  sincos(static_cast<double>(ang), &sd, &cd);
  cs[idx] = static_cast<float>(cd) * scaling;
  sn[idx] = static_cast<float>(sd) * scaling;
}

// One block per row: pairs (i, i + half) (interleaved: (2i, 2i + 1)) of the first rotary =
// 2 half dims of each of the `rotated` q and k heads are rotated; every other column (the rest
// of those heads, the v heads) is copied (added when acc).
template <class T>
__global__ void __launch_bounds__(256)
    rope_apply_kernel(const T* in, T* out, int S, int rotated, int d, int half, int width,
                      const float* __restrict__ cs, const float* __restrict__ sn, float sign,
                      bool acc, bool interleaved) {
  const std::int64_t r = blockIdx.x;
  const int s = static_cast<int>(r % S), rotary = 2 * half;
  const T* xi = in + r * width;
  T* xo = out + r * width;
  const float* c_row = cs + static_cast<std::int64_t>(s) * half;
  const float* s_row = sn + static_cast<std::int64_t>(s) * half;
  const int pairs = rotated * half;
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int head = p / half, i = p % half;
    const int col = head * d + (interleaved ? 2 * i : i), col2 = col + (interleaved ? 1 : half);
    const float x1 = to_f(xi[col]), x2 = to_f(xi[col2]);
    const float c = c_row[i], sv = sign * s_row[i];
    float o1 = x1 * c - x2 * sv, o2 = x2 * c + x1 * sv;
    if (acc) {
      o1 = to_f(xo[col]) + o1;
      o2 = to_f(xo[col2]) + o2;
    }
    xo[col] = from_f<T>(o1);
    xo[col2] = from_f<T>(o2);
  }
  for (int col = threadIdx.x; col < width; col += blockDim.x) {
    if (col < rotated * d && col % d < rotary) continue;  // rotated above
    const float v = to_f(xi[col]);
    xo[col] = from_f<T>(acc ? to_f(xo[col]) + v : v);
  }
}

// Temperature tuning: element i of the qkv rows; q columns times tau(position), the rest copied.
template <class T>
__global__ void temperature_kernel(const T* in, T* out, std::int64_t n, int S, int width, int q_width, int floor_scale,
                                   float attn_scale, bool acc) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const std::int64_t row = i / width;
  const int col = static_cast<int>(i % width);
  float v = to_f(in[i]);
  if (col < q_width) v *= attn_temperature(static_cast<int>(row % S), floor_scale, attn_scale);
  out[i] = from_f<T>(acc ? to_f(out[i]) + v : v);
}

}  // namespace

void rope_temperature(FType t, const void* in, void* out, int B, int S, int heads, int kv_heads, int d, int dv,
                      int floor_scale, float attn_scale, bool acc, cudaStream_t s) {
  const int width = (heads + kv_heads) * d + kv_heads * dv;  // AttnDims::qkv_width
  const std::int64_t n = static_cast<std::int64_t>(B) * S * width;
  if (n <= 0) return;
  const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  if (t == FType::BF16)
    temperature_kernel<bf16><<<blocks, 256, 0, s>>>(static_cast<const bf16*>(in), static_cast<bf16*>(out), n, S, width,
                                                    heads * d, floor_scale, attn_scale, acc);
  else
    temperature_kernel<float><<<blocks, 256, 0, s>>>(static_cast<const float*>(in), static_cast<float*>(out), n, S,
                                                     width, heads * d, floor_scale, attn_scale, acc);
  check_launch("rope_temperature");
}

void rope_apply(FType t, const void* in, void* out, int B, int S, int heads, int kv_heads, int d,
                int dv, int rotary_dim, const float* inv_freq_host, float attention_scaling,
                float sign, bool acc, float* scratch, cudaStream_t s, bool interleaved) {
  if (d % 2 != 0 || d / 2 > kRopeMaxHalf)
    throw Error("rope: head dim " + std::to_string(d) + " must be even and at most " +
                std::to_string(2 * kRopeMaxHalf));
  if (rotary_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim > d)
    throw Error("rope: rotary dim " + std::to_string(rotary_dim) +
                " must be even, positive and at most the head dim " + std::to_string(d));
  const int half = rotary_dim / 2;
  const std::int64_t rows = static_cast<std::int64_t>(B) * S;
  if (rows <= 0) return;
  InvFreq f{};
  for (int i = 0; i < half; ++i) f.v[i] = inv_freq_host[i];
  float* cs = scratch;
  float* sn = scratch + static_cast<std::int64_t>(S) * half;
  const std::int64_t tn = static_cast<std::int64_t>(S) * half;
  rope_table_kernel<<<static_cast<unsigned>((tn + 255) / 256), 256, 0, s>>>(
      f, S, half, attention_scaling, cs, sn);
  check_launch("rope_table");
  const int width = (heads + kv_heads) * d + kv_heads * dv;  // AttnDims::qkv_width
  const int rotated = heads + kv_heads;
  if (t == FType::BF16)
    rope_apply_kernel<bf16><<<static_cast<unsigned>(rows), 256, 0, s>>>(
        static_cast<const bf16*>(in), static_cast<bf16*>(out), S, rotated, d, half, width, cs, sn,
        sign, acc, interleaved);
  else
    rope_apply_kernel<float><<<static_cast<unsigned>(rows), 256, 0, s>>>(
        static_cast<const float*>(in), static_cast<float*>(out), S, rotated, d, half, width, cs,
        sn, sign, acc, interleaved);
  check_launch("rope_apply");
}

}  // namespace remat::kernels
