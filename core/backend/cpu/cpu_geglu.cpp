// GeGLU (Gemma's MLP activation): in[0] [M, 2K] (gate | up) -> out[0] [M, K] =
// gelu_tanh(gate) * up. Backward reads the input; din[0] = [dy * up * gelu_tanh'(gate) |
// dy * gelu_tanh(gate)], added into when acc[0]. One thread per row range, so the split never
// changes a bit.
#include <algorithm>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"
#include "core/util/gelu.h"

namespace remat {

using cpu::FV;

namespace {

constexpr std::int64_t kGrain = 1 << 14;  // elements per part of a parallel loop

void check_shape(const OpArgs& a, const char* op) {
  if (a.M < 0 || a.K <= 0)
    throw Error(std::string("cpu ") + op + ": bad shape M=" + std::to_string(a.M) +
                " K=" + std::to_string(a.K));
}

}  // namespace

void CpuBackend::fwd_GeGlu(const OpArgs& a) {
  const char* op = "geglu_fwd";
  check_shape(a, op);
  const std::int64_t rows = a.M;
  const int F = a.K;
  cpu::check_float(*a.in[0], op, "gate_up", rows * 2 * F);
  cpu::check_float(*a.out[0], op, "y", rows * F);
  FV in(*a.in[0]), y(*a.out[0]);
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, rows, std::max<std::int64_t>(1, kGrain / F),
                    [&](std::int64_t r0, std::int64_t r1, int) {
    if (k) return k->glu(cpu::simd::Act::kGeluTanh, in.ref(), {}, y.ref(), r0, r1, F, false);
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t g0 = r * 2 * F;  // the row's gate; its up follows F later
      cpu::for_gelu_tanh(in, g0, g0 + F, [&](std::int64_t ig, float gate, float t) {
        y.set(r * F + (ig - g0), gelu_tanh_of(gate, t) * in[ig + F]);
      });
    }
  });
}

void CpuBackend::bwd_GeGlu(const OpArgs& a) {
  const char* op = "geglu_bwd";
  check_shape(a, op);
  const std::int64_t rows = a.M;
  const int F = a.K;
  const bool acc = a.acc[0];
  cpu::check_float(*a.in[0], op, "gate_up", rows * 2 * F);
  cpu::check_float(*a.dout[0], op, "dy", rows * F);
  cpu::check_float(*a.din[0], op, "dgate_up", rows * 2 * F);
  FV in(*a.in[0]), dy(*a.dout[0]), out(*a.din[0]);
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, rows, std::max<std::int64_t>(1, kGrain / F),
                    [&](std::int64_t r0, std::int64_t r1, int) {
    if (k) return k->glu(cpu::simd::Act::kGeluTanh, in.ref(), dy.ref(), out.ref(), r0, r1, F, acc);
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t g0 = r * 2 * F;
      cpu::for_gelu_tanh(in, g0, g0 + F, [&](std::int64_t ig, float gate, float t) {
        const std::int64_t iu = ig + F;
        const float up = in[iu], d = dy[r * F + (ig - g0)];
        out.put(ig, d * up * gelu_tanh_grad_of(gate, t), acc);
        out.put(iu, d * gelu_tanh_of(gate, t), acc);
      });
    }
  });
}

}  // namespace remat
