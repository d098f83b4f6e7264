#include "core/backend/cuda_sizing.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>

#include "core/graph/block_graph.h"
#include "core/util/error.h"
#include "kernels/scratch_bytes.h"

namespace remat {

using kernels::align256;

std::int64_t cuda_head_chunk_rows(std::int64_t rows, int V, std::size_t chunk_bytes) {
  const std::int64_t budget = static_cast<std::int64_t>(chunk_bytes);
  std::int64_t c = budget / (static_cast<std::int64_t>(std::max(V, 1)) * 4);
  c = c / 64 * 64;
  if (c < 64) c = 64;
  return std::min(c, std::max<std::int64_t>(rows, 1));
}

std::uint64_t cuda_workspace_bytes(const ModelConfig& m, std::size_t head_chunk_bytes,
                                   std::optional<std::size_t> embedding_scratch) {
  const std::int64_t B = m.batch, S = m.seq, tokens = m.tokens();
  const std::size_t act = m.act_size();
  std::size_t op = 0;
  auto take = [&](std::size_t b) { op = std::max(op, align256(b)); };
  // Naive attention: one head's [B, S, S] in fp32 (scores, dP) or the model dtype (dS); with
  // soft-capped scores the backward holds dS and the recomputed fp32 scores at once.
  if (m.attention == AttentionImpl::Naive) {
    const std::size_t ss = static_cast<std::size_t>(B) * S * S;
    take(ss * 4);
    if (m.attn_softcap > 0.0) take(align256(ss * act) + ss * 4);
  } else {
    take(kernels::flash_bwd_scratch_bytes(m.batch, m.heads, m.seq));
  }
  // Head: fp32 logits and dlogits of one chunk.
  {
    const std::int64_t c = cuda_head_chunk_rows(tokens, m.vocab, head_chunk_bytes);
    const std::size_t n = static_cast<std::size_t>(c) * m.vocab;
    take(align256(n * 4) + align256(n * act));
  }
  // Norm backward partials (blocks and the final norm), bias column sums.
  take(kernels::norm_bwd_scratch_bytes(tokens, m.hidden));
  const BlockGraph graph(m);
  for (int ti = 0; ti < graph.table_count(); ++ti)
  for (const StepDef& s : graph.table(ti).steps()) {
    if (s.op == OpKind::Linear && !s.b.empty()) take(kernels::colsum_scratch_bytes(s.M, s.N));
    if (s.op == OpKind::QkNorm || s.op == OpKind::QkHeadNorm)
      take(kernels::norm_bwd_scratch_bytes(s.M, std::max(s.K, s.N)));
    if (s.op == OpKind::QkHeadNorm && s.w.empty()) take(kernels::qk_head_norm_scratch_bytes(s.M, m.head_dim(), false));
  }
  if (m.position == PositionKind::Rope && !m.mla.on()) take(kernels::rope_scratch_bytes(m.seq, m.head_dim()));
  if (m.mla.on()) take(kernels::mla_pack_scratch_bytes(m.seq, m.mla.rope_dim));  // the rotation's cos and sin
  // The router's fp32 weights, one per (token, choice) (kernels/moe.cu).
  if (m.moe.on()) take(static_cast<std::size_t>(tokens) * static_cast<std::size_t>(m.moe.top_k) * 4);
  // Embedding backward: sorted tokens and CUB's sort storage.
  take(embedding_scratch ? *embedding_scratch : kernels::embedding_bwd_scratch_bound(tokens));
  return kCudaGemmWorkspaceBytes + align256(op);
}

std::size_t cuda_size_class(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes < (std::size_t{1} << 20)) return (bytes + 511) / 512 * 512;
  std::size_t p = std::size_t{1} << 20;
  while (p <= bytes / 2) p <<= 1;
  const std::size_t g = p / 16;
  return (bytes + g - 1) / g * g;
}

CudaPoolBytes cuda_pool_bytes(const std::vector<MemoryEvent>& events) {
  struct Class {
    std::int64_t live = 0, held = 0;
  };
  std::map<std::size_t, Class> classes;
  CudaPoolBytes out;
  std::int64_t live = 0;  // bytes of live blocks, rounded to their classes
  for (const MemoryEvent& e : events) {
    if (e.space != Space::Device || e.delta == 0) continue;
    const std::size_t bytes = static_cast<std::size_t>(e.delta > 0 ? e.delta : -e.delta);
    const std::size_t cls = cuda_size_class(bytes);
    Class& c = classes[cls];
    c.live += e.delta > 0 ? 1 : -1;
    c.held = std::max(c.held, c.live);
    live += e.delta > 0 ? static_cast<std::int64_t>(cls) : -static_cast<std::int64_t>(cls);
    out.rounded_peak = std::max(out.rounded_peak, static_cast<std::uint64_t>(std::max<std::int64_t>(live, 0)));
  }
  for (const auto& [size, c] : classes) out.reserved += static_cast<std::uint64_t>(size) * static_cast<std::uint64_t>(c.held);
  return out;
}

std::size_t cuda_head_chunk_bytes_from_env() {
  const char* e = std::getenv("REMAT_HEAD_CHUNK_MIB");
  if (!e) return kCudaHeadChunkBytes;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  if (end == e || *end != '\0' || v < 1 || v > 65536)
    throw Error(std::string("REMAT_HEAD_CHUNK_MIB must be a whole number of MiB in [1, 65536], got '") + e + "'");
  return static_cast<std::size_t>(v) << 20;
}

}  // namespace remat
