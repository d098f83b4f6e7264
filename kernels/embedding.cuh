// Token (+ position) embedding: out[r, :] = wte[tokens[r], :] * scale (+ wpe[r % S, :]), the
// product in fp32 (scale: 1, or Gemma's sqrt(hidden) in the model's dtype).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/launch.cuh"
#include "kernels/scratch_bytes.h"

namespace remat::kernels {

// wpe may be null. Tokens outside [0, V) give zero rows (the backend checks them first).
void embedding_fwd(FType t, const std::int32_t* tokens, const void* wte, const void* wpe,
                   void* out, int B, int S, int H, std::int64_t V, float scale, cudaStream_t s);

// Scratch of the deterministic backward for n = B * S tokens (sorted keys and positions and
// the radix sort's temporary storage). Queries CUB, so it needs a CUDA device.
std::size_t embedding_bwd_scratch_bytes(std::int64_t n);  // asks CUB on this device

// dwte[v] += scale * (sum of dout rows whose token is v), rows summed in position order (tokens are
// stably sorted, then one block per distinct token adds its rows: no float atomics);
// dwpe[s] += sum over b of dout[b, s] (dwpe may be null).
void embedding_bwd(FType t, const std::int32_t* tokens, const void* dout, void* dwte, void* dwpe,
                   int B, int S, int H, std::int64_t V, float scale, void* scratch,
                   std::size_t scratch_bytes, cudaStream_t s);

}  // namespace remat::kernels
