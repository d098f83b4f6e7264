// Fused causal (optionally banded and soft-capped) flash attention on a packed qkv
// [B, S, (heads + kv_heads) * d + kv_heads * dv] (all q heads, then k, d wide, then v, dv wide:
// AttnDims::qkv_width; GQA: q head h uses kv head h / (heads / kv_heads)). Forward: tiled online
// softmax, writes ctx [B, S, heads * dv] and lse [B, heads, S] (fp32, natural log); no S x S
// buffer. Backward (always accumulates into dqkv): dK and dV per key tile by iterating over
// the query tiles of every q head of the group, dQ in a separate pass per query tile: no
// floating-point atomics, the same inputs give the same bits. Dropout on the probabilities
// uses philox_bits(key, ((b * heads + h) * S + i) * S + j), the naive path's mask.
// Attention sinks (gpt-oss, sinks given): one logit per head joins every row's softmax as a
// column with no value; each row's running max starts at the sink and its running sum at 1, so
// lse includes it and the backward's dQ, dK, dV are unchanged in form. The sinks' gradient,
// dsinks[h] += -sum over (b, i) of exp(sink - lse) * D (D = rowsum(dO * O), the backward's own
// scratch), is one block per head summing in a fixed order after the backward's kernels.
//
// Two implementations: tensor cores (bf16, d in {32, 64, 128}, dv = d, mma.sync m16n8k16 with
// fp32 accumulation) and a scalar fp32-arithmetic one for everything else (fp32 models, other d,
// value heads of another width: multi-head latent attention).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/util/philox.h"
#include "kernels/launch.cuh"
#include "kernels/scratch_bytes.h"

namespace remat::kernels {

enum class FlashImpl : int { Auto = 0, Scalar = 1, TensorCore = 2 };

struct FlashArgs {
  const void* qkv = nullptr;
  void* ctx = nullptr;        // forward output; backward input (O)
  float* lse = nullptr;       // forward output; backward input
  const void* dctx = nullptr; // backward
  void* dqkv = nullptr;       // backward (accumulated)
  float* scratch = nullptr;   // backward: flash_bwd_scratch_bytes
  int B = 0, S = 0, heads = 0, kv_heads = 0, d = 0;
  int dv = 0;  // the value heads' width (AttnDims::dv); 0: d
  float scale = 0.0f;
  int window = 0;        // the band (AttnDims::band(), detail/attn_band.h): > 0 a window, < 0 chunks
  float softcap = 0.0f;  // > 0: scores softcap * tanh(q . k * scale / softcap), before the mask
  DropoutKey key;
  float p = 0.0f;  // attention dropout probability
  // Tensor-core forward and dQ kernels: groups of 16 query rows per warp (1 or 2; d = 128
  // always uses 1). Two groups share each K and V fragment; the results are the same bits.
  int row_groups = 1;
  const void* sinks = nullptr;  // [heads] in the qkv's dtype, or null: no sinks
  void* dsinks = nullptr;       // backward, with sinks: their gradient (accumulated), same dtype
};

// Whether the tensor-core path can run these arguments (dtype, head dim, value width = d,
// alignment).
bool flash_tc_supported(FType t, const FlashArgs& a, bool backward);
// fp32 scratch of the backward, D = rowsum(dO * O): flash_bwd_scratch_bytes (scratch_bytes.h).

void flash_fwd(FType t, const FlashArgs& a, FlashImpl impl, cudaStream_t s);
void flash_bwd(FType t, const FlashArgs& a, FlashImpl impl, cudaStream_t s);

}  // namespace remat::kernels
