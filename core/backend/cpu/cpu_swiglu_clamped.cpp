// The clamped SwiGLU (gpt-oss's MLP activation): in[0] [M, 2K] (gate | up) -> out[0] [M, K] =
// (u + 1) * g * sigmoid(1.702 * g) with g = min(gate, limit) and u = clamp(up, -limit, limit).
// Backward reads the input; a clamped value passes no gradient (as torch.clamp's: it passes
// where the value lies within the bounds, the bounds included); din[0] is added into when acc[0].
// One thread per row range, so the split never changes a bit. The formulas: core/util/swiglu_clamped.h.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"
#include "core/util/swiglu_clamped.h"

namespace remat {

using cpu::FV;

namespace {

constexpr std::int64_t kGrain = 1 << 14;  // elements per part of a parallel loop

void check_clamped(const OpArgs& a, const char* op) {
  if (a.M < 0 || a.K <= 0)
    throw Error(std::string("cpu ") + op + ": bad shape M=" + std::to_string(a.M) + " K=" + std::to_string(a.K));
  if (!(a.limit > 0.0f) || !std::isfinite(a.limit))
    throw Error(std::string("cpu ") + op + ": the clamp limit must be a positive number, got " + std::to_string(a.limit));
}

}  // namespace

void CpuBackend::fwd_SwiGluClamped(const OpArgs& a) {
  const char* op = "swiglu_clamped_fwd";
  check_clamped(a, op);
  const std::int64_t rows = a.M;
  const int F = a.K;
  const float L = a.limit;
  cpu::check_float(*a.in[0], op, "gate_up", rows * 2 * F);
  cpu::check_float(*a.out[0], op, "y", rows * F);
  FV in(*a.in[0]), y(*a.out[0]);
  cpu::parallel_for(*pool_, rows, std::max<std::int64_t>(1, kGrain / F), [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r)
      for (int c = 0; c < F; ++c) {
        const std::int64_t ig = r * 2 * F + c;
        y.set(r * F + c, swiglu_clamped(in[ig], in[ig + F], L));
      }
  });
}

void CpuBackend::bwd_SwiGluClamped(const OpArgs& a) {
  const char* op = "swiglu_clamped_bwd";
  check_clamped(a, op);
  const std::int64_t rows = a.M;
  const int F = a.K;
  const float L = a.limit;
  const bool acc = a.acc[0];
  cpu::check_float(*a.in[0], op, "gate_up", rows * 2 * F);
  cpu::check_float(*a.dout[0], op, "dy", rows * F);
  cpu::check_float(*a.din[0], op, "dgate_up", rows * 2 * F);
  FV in(*a.in[0]), dy(*a.dout[0]), out(*a.din[0]);
  cpu::parallel_for(*pool_, rows, std::max<std::int64_t>(1, kGrain / F), [&](std::int64_t r0, std::int64_t r1, int) {
    for (std::int64_t r = r0; r < r1; ++r)
      for (int c = 0; c < F; ++c) {
        const std::int64_t ig = r * 2 * F + c, iu = ig + F;
        float dg = 0.0f, du = 0.0f;
        swiglu_clamped_grad(in[ig], in[iu], L, dy[r * F + c], dg, du);
        out.put(ig, dg, acc);
        out.put(iu, du, acc);
      }
  });
}

}  // namespace remat
