// Attention sinks (gpt-oss's self_attn.sinks), shared by the naive and flash paths and their
// reference loops: one learned logit per head that joins every row's softmax as one more column,
// never soft-capped, masked by nothing and followed by no value, so the keys' weights sum to
// less than 1. The forward ops take it into the row's max and sum (flash: the running max starts
// at the sink and the running sum at 1, so lse includes it). Its gradient is a separate pass per
// head: dsink[h] += -sum over (b, i) of p_sink * sum_j P_ij dP_ij, each head's terms summed in
// (b, i) order by one thread, so the bits depend on neither the thread count nor the schedule.
#pragma once
#include <cstdint>

#include "core/backend/cpu/cpu_attention.h"
#include "core/backend/cpu/cpu_common.h"

namespace remat::cpu::attn {

// sinks: [heads] in the model's dtype, or null (no sink: every op as without one). Backward
// needs its gradient too.
void check_sinks(const AttnDims& a, const char* op, const Tensor* sinks, const Tensor* dsinks,
                 bool backward);

// One row's term of the naive path's sink gradient, p_sink * sum_j P dP: s the row's n scores
// (scaled, soft-capped) over its band, P and dP the stored row's band from at. p_sink is taken in
// double from the scores, not from P (which may be bf16, and 1 - sum P loses a small sink's
// weight entirely).
double sink_row_term(const float* s, int n, double sink, FV P, FV dP, std::int64_t at);

// Naive path, the reference loops: dsinks[h] += -sum over (b, i) of sink_row_term, the scores
// recomputed row by row. Uses the lanes' staged K head, a row and a head vector of ws. (The GEMM
// path has its own, cpu_attention.cpp: the same terms in the same order, scores on GEMMs.)
void naive_sink_grad(ThreadPool& pool, const AttnWs& ws, const AttnDims& a, FV qkv, FV P, FV dP,
                     FV sinks, FV dsinks);

// Flash path: dsinks[h] += -sum exp(sink - lse) * D, D = dO . O = sum_j P_ij dP_ij (with dropout
// too: O already holds the kept, rescaled weights). No workspace.
void flash_sink_grad(ThreadPool& pool, const AttnDims& a, FV ctx, FV dctx, const float* lse,
                     FV sinks, FV dsinks);

}  // namespace remat::cpu::attn
