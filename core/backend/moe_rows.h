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

// The router of an op's sizes.
inline MoeRouter moe_router(const MoeDims& d) {
  MoeRouter r;
  r.experts = d.experts, r.top_k = d.top_k, r.sigmoid = d.sigmoid, r.norm = d.norm_topk;
  r.groups = d.groups, r.topk_groups = d.topk_groups, r.scaling = d.scaling;
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
