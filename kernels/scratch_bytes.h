// The scratch each CUDA kernel needs, in plain C++: the kernels size their scratch with these,
// and so does a plan for a CUDA rank made where no CUDA is built (core/backend/cuda_sizing.h).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace remat::kernels {

inline std::size_t align256(std::size_t b) { return (b + 255) / 256 * 256; }

// Column sums (reduce.cuh): rows split into 1..64 chunks of at least 64 rows, fp32 partials.
inline int colsum_chunks(std::int64_t rows) {
  return static_cast<int>(std::clamp<std::int64_t>((rows + 63) / 64, 1, 64));
}
inline std::size_t colsum_scratch_bytes(std::int64_t rows, int cols) {
  return static_cast<std::size_t>(colsum_chunks(rows)) * static_cast<std::size_t>(cols) * 4;
}

// Norm backward (layernorm.cuh, rmsnorm.cuh, qk_norm): per-row (mean, rstd), then 1..256 chunks
// of 32 rows × 2H fp32 partial sums.
inline int norm_bwd_chunks(std::int64_t rows) {
  return static_cast<int>(std::clamp<std::int64_t>((rows + 31) / 32, 1, 256));
}
inline std::size_t norm_bwd_scratch_bytes(std::int64_t rows, int H) {
  const std::size_t stats = align256(static_cast<std::size_t>(rows) * 8);
  return stats + static_cast<std::size_t>(norm_bwd_chunks(rows)) * 2 * static_cast<std::size_t>(H) * 4;
}

// Per-head QK-norm (qk_norm.cu): the backward's, and without weights (Llama 4's L2 norm) a zero
// weight and a weight gradient nobody reads ahead of it, d elements each.
inline std::size_t qk_head_norm_scratch_bytes(std::int64_t rows, int d, bool weights) {
  const std::size_t bwd = norm_bwd_scratch_bytes(rows, d);
  return weights ? bwd : 2 * align256(static_cast<std::size_t>(d) * 4) + bwd;
}

// RoPE (rope.cuh): the cos and sin tables of S positions × d/2 frequencies, fp32.
inline std::size_t rope_scratch_bytes(int S, int d) {
  return 2 * static_cast<std::size_t>(S) * static_cast<std::size_t>(d / 2) * 4 + 256;
}

// Multi-head latent attention's packing (mla_pack.cuh): the cos and sin tables of S positions ×
// rotary_dim/2 frequencies, fp32 (copied from the host each call).
inline std::size_t mla_pack_scratch_bytes(int S, int rotary_dim) {
  return 2 * static_cast<std::size_t>(S) * static_cast<std::size_t>(rotary_dim / 2) * 4;
}

// Flash attention's backward (flash_attn.cuh): D = rowsum(dO * O), [B, heads, S] fp32.
inline std::size_t flash_bwd_scratch_bytes(int B, int heads, int S) {
  return static_cast<std::size_t>(B) * heads * S * 4;
}

// Embedding backward (embedding.cuh) of n tokens: sorted tokens, positions in and out, and
// `sort_bytes` of CUB's radix sort storage (which CUB gives only on a device).
inline std::size_t embedding_bwd_scratch_bytes(std::int64_t n, std::size_t sort_bytes) {
  if (n <= 0) return 0;
  return 3 * align256(static_cast<std::size_t>(n) * 4) + align256(sort_bytes);
}
// Where CUB cannot be asked: a bound on the embedding backward's scratch of n tokens. CUB's
// radix sort of int32 pairs keeps a second copy of keys and values (8n bytes) besides its
// histograms and tile states, which 4 MiB and n bytes more cover.
inline std::size_t embedding_bwd_scratch_bound(std::int64_t n) {
  const std::size_t u = static_cast<std::size_t>(n);
  return 3 * align256(u * 4) + align256(u * 8) + u + (std::size_t{4} << 20);
}

}  // namespace remat::kernels
