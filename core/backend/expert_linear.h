// The experts' projections (ExpertLinear) as the CUDA backend runs them (the CPU's group the
// experts over its lanes, cpu_expert_gemm.cpp, the same per expert): one Linear
// per expert over its rows (rows start(e) .. start(e) + count(e) of x and y, its N x K slice of
// the weights, and of the biases when the experts have them: its N); backward dx (acc) and
// dW += (dB +=) of its slice, so an expert without rows leaves its slice alone. `be` is the
// backend (its linear_fwd / linear_bwd); the caller checked the tensors.
#pragma once
#include <cstdint>

#include "core/backend/tensor.h"
#include "core/graph/op_table.h"

namespace remat {

template <class Backend, class Start, class Count>
void run_expert_linears(Backend& be, const OpArgs& a, Pass pass, Start start, Count count) {
  const int K = a.K, N = a.N;
  const std::int64_t NK = static_cast<std::int64_t>(N) * K;
  const bool bwd = pass == Pass::Backward, has_dx = bwd && a.din[0] && *a.din[0];
  for (int e = 0; e < a.moe.experts; ++e) {
    const std::int64_t s = start(e), n = count(e);
    if (n == 0) continue;
    const Tensor x = a.in[0]->slice(s * K, n * K), W = a.w->slice(e * NK, NK);
    const Tensor b = a.b ? a.b->slice(e * N, N) : Tensor{};
    if (!bwd) {
      be.linear_fwd(x, W, a.b ? &b : nullptr, a.out[0]->slice(s * N, n * N), n, K, N);
      continue;
    }
    const Tensor dx = has_dx ? a.din[0]->slice(s * K, n * K) : Tensor{};
    const Tensor db = a.db ? a.db->slice(e * N, N) : Tensor{};
    be.linear_bwd(x, W, a.dout[0]->slice(s * N, n * N), has_dx ? &dx : nullptr, a.dw->slice(e * NK, NK),
                  a.db ? &db : nullptr, n, K, N, a.acc[0]);
  }
}

}  // namespace remat
