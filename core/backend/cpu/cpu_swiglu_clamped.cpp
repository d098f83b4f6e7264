// The clamped SwiGLU (gpt-oss's MLP activation): in[0] [M, 2K] (gate | up) -> out[0] [M, K] =
// (u + 1) * g * sigmoid(1.702 * g) with g = min(gate, limit) and u = clamp(up, -limit, limit).
// Backward reads the input; a clamped value passes no gradient (as torch.clamp's: it passes
// where the value lies within the bounds, the bounds included); din[0] is added into when acc[0].
// One thread per row range, so the split never changes a bit.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"

namespace remat {

using cpu::FV;

namespace {

constexpr std::int64_t kGrain = 1 << 14;  // elements per part of a parallel loop
constexpr float kAlpha = 1.702f;

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
        const float g = std::min(in[ig], L), u = std::clamp(in[ig + F], -L, L);
        const float glu = g * (1.0f / (1.0f + std::exp(-(g * kAlpha))));
        y.set(r * F + c, (u + 1.0f) * glu);
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
        const float gate = in[ig], up = in[iu], d = dy[r * F + c];
        const float g = std::min(gate, L), u = std::clamp(up, -L, L);
        const float s = 1.0f / (1.0f + std::exp(-(g * kAlpha)));
        const float glu = g * s;
        const float dg = gate <= L ? d * (u + 1.0f) * (s + g * kAlpha * s * (1.0f - s)) : 0.0f;
        const float du = up >= -L && up <= L ? d * glu : 0.0f;
        out.put(ig, dg, acc);
        out.put(iu, du, acc);
      }
  });
}

}  // namespace remat
