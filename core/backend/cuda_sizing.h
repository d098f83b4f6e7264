// The CUDA backend's memory rules in plain C++, so that a plan for a CUDA rank can be made where
// no GPU (or no CUDA at all) is at hand: its workspace (the cuBLASLt workspace and the largest
// op scratch) and its caching allocator's size classes, hence the bytes it reserves from the
// driver. The CUDA backend sizes itself with these same functions (cuda/cuda_backend.cpp,
// cuda/caching_allocator.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/memory/tracking_allocator.h"
#include "core/model/model_config.h"

namespace remat {

inline constexpr std::size_t kCudaGemmWorkspaceBytes = std::size_t{32} << 20;  // cuBLASLt's
inline constexpr std::size_t kCudaHeadChunkBytes = std::size_t{64} << 20;      // fp32 logits

// The head chunk REMAT_HEAD_CHUNK_MIB asks for (whole MiB in [1, 65536]), else the default;
// throws Error for another value. The CUDA backend and a plan for it read it alike.
std::size_t cuda_head_chunk_bytes_from_env();

// Rows of the head's logits chunk: fp32 logits of about chunk_bytes, in multiples of 64 rows.
std::int64_t cuda_head_chunk_rows(std::int64_t rows, int V, std::size_t chunk_bytes = kCudaHeadChunkBytes);

// The CUDA backend's workspace for model m: the GEMM workspace and the largest scratch of any op.
// `embedding_scratch`: what the embedding backward needs with CUB's sort storage, which only a
// device can tell; without it, the backend's own bound (kernels::embedding_bwd_scratch_bound).
std::uint64_t cuda_workspace_bytes(const ModelConfig& m, std::size_t head_chunk_bytes = kCudaHeadChunkBytes,
                                   std::optional<std::size_t> embedding_scratch = std::nullopt);

// The caching allocator's block for a request: 512-byte steps below 1 MiB, above it steps of
// 1/16 of the power of two below the size (at most 6.25 % more).
std::size_t cuda_size_class(std::size_t bytes);

// The caching allocator over these events (device space only). `reserved`: what it holds from
// the driver at the end, which is also the most it held at any point: a block is reused only by
// a request of its own size class and never given back (unless an allocation fails: then the
// cache is released and the request retried). `rounded_peak`: the most its live blocks take at
// once, each rounded up to its class: what must fit after such a release. A block freed while a
// copy still reads it (an offload's source) waits for the copy before it is reused; these
// figures reuse it at once, so for schedules that move tensors to the host they are the least
// the allocator holds.
struct CudaPoolBytes {
  std::uint64_t reserved = 0, rounded_peak = 0;
};
CudaPoolBytes cuda_pool_bytes(const std::vector<MemoryEvent>& events);

}  // namespace remat
