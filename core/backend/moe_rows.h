// Where each (token, choice) of a mixture of experts goes in the permuted buffer, from the
// chosen experts and their fp32 weights: each expert's tokens in token order from its first row;
// with a capacity C, expert e's rows start at e·C and hold the C of highest weight (ties to the
// earlier token; Megatron-LM's drop policy "probs"), the others dropped (row -1). Shared by the
// backends so that every device routes alike. ids: n = tokens·top_k scratch entries; off:
// experts + 1.
#pragma once
#include <algorithm>
#include <cstdint>

#include <string>

#include "core/backend/moe_score.h"
#include "core/graph/op_table.h"
#include "core/util/error.h"

namespace remat {

// The routing table (i32) of an op's sizes, as offsets into it: per (token, choice) its expert,
// then its row in the permuted buffer (-1: dropped by the capacity), then per expert its first
// row and its row count.
struct MoeTable {
  std::int64_t row = 0, start = 0, count = 0, entries = 0;
  explicit MoeTable(const MoeDims& d) {
    const std::int64_t n = d.tokens * d.top_k;
    row = n, start = 2 * n, count = 2 * n + d.experts, entries = 2 * n + 2 * d.experts;
  }
};

// The rows expert e computes from its count: its tokens (dropless) or its whole capacity block
// (padding rows are zero and stay zero through the projections, as Megatron-LM computes them;
// with expert biases they carry the biases' values onward, which no token's output reads).
inline std::int64_t moe_expert_rows(const MoeDims& d, std::int64_t count) { return d.capacity > 0 ? d.capacity : count; }

// The sizes every MoE op needs, checked the same on every backend: Error("<backend> <op>: ...").
inline void check_moe_dims(const MoeDims& d, const char* backend, const char* op) {
  const bool bad_groups = d.groups > 1 && (d.groups > 64 || d.experts % d.groups != 0 || d.topk_groups < 1 ||
                                           d.topk_groups > d.groups || d.top_k > d.topk_groups * (d.experts / d.groups));
  if (d.experts <= 0 || d.top_k <= 0 || d.top_k > d.experts || d.tokens <= 0 || d.capacity < 0 || bad_groups)
    throw Error(std::string(backend) + " " + op + ": bad expert dims (experts " + std::to_string(d.experts) +
                ", top_k " + std::to_string(d.top_k) + ", tokens " + std::to_string(d.tokens) + ", groups " +
                std::to_string(d.groups) + ", topk_groups " + std::to_string(d.topk_groups) + ")");
}

// The router of an op's sizes.
inline MoeRouter moe_router(const MoeDims& d) {
  MoeRouter r;
  r.experts = d.experts, r.top_k = d.top_k, r.sigmoid = d.sigmoid, r.norm = d.norm_topk;
  r.groups = d.groups, r.topk_groups = d.topk_groups, r.group_max = d.group_max, r.scaling = d.scaling;
  return r;
}

inline void moe_assign_rows(const MoeDims& d, const std::int32_t* expert, const float* w32, std::int32_t* row,
                            std::int32_t* start, std::int32_t* count, std::int64_t* ids, std::int64_t* off) {
  const std::int64_t n = d.tokens * d.top_k;
  const int E = d.experts;
  std::fill(off, off + E + 1, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    if (expert[i] < 0 || expert[i] >= E)
      throw Error("moe routing: choice " + std::to_string(i) + " names expert " + std::to_string(expert[i]) +
                  " of " + std::to_string(E));
    ++off[expert[i] + 1];
  }
  for (int e = 0; e < E; ++e) off[e + 1] += off[e];
  for (std::int64_t i = 0; i < n; ++i) ids[off[expert[i]]++] = i;  // off[e] moves to e's end
  std::int64_t next = 0, begin = 0;
  for (int e = 0; e < E; ++e) {
    std::int64_t* mine = ids + begin;
    std::int64_t m = off[e] - begin;
    begin = off[e];
    if (d.capacity > 0 && m > d.capacity) {
      std::stable_sort(mine, mine + m, [&](std::int64_t x, std::int64_t y) { return w32[x] > w32[y]; });
      for (std::int64_t i = d.capacity; i < m; ++i) row[mine[i]] = -1;
      m = d.capacity;
      std::sort(mine, mine + m);
    }
    start[e] = static_cast<std::int32_t>(d.capacity > 0 ? e * d.capacity : next);
    count[e] = static_cast<std::int32_t>(m);
    for (std::int64_t i = 0; i < m; ++i) row[mine[i]] = static_cast<std::int32_t>(start[e] + i);
    next += m;
  }
}

}  // namespace remat
