// The exact (erf) GELU over M elements: out[0] = x * Phi(x) of in[0]. Backward reads the input;
// din[0] = dy * (Phi(x) + x * phi(x)), added into when acc[0]. Every element is computed by
// one thread from its own inputs, so the split never changes a bit.
#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"
#include "core/util/gelu.h"

namespace remat {

using cpu::FV;

namespace {

constexpr std::int64_t kGrain = 1 << 14;  // elements per part of a parallel loop

void check_n(std::int64_t n, const char* op) {
  if (n < 0) throw Error(std::string("cpu ") + op + ": negative element count " + std::to_string(n));
}

}  // namespace

void CpuBackend::fwd_GeluErf(const OpArgs& a) {
  const char* op = "gelu_erf_fwd";
  const std::int64_t n = a.M;
  check_n(n, op);
  cpu::check_float(*a.in[0], op, "x", n);
  cpu::check_float(*a.out[0], op, "y", n);
  FV x(*a.in[0]), y(*a.out[0]);
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, n, kGrain, [&](std::int64_t b, std::int64_t e, int) {
    if (k) return k->gelu(cpu::simd::Act::kGeluErf, x.ref(), {}, y.ref(), b, e, false);
    for (std::int64_t i = b; i < e; ++i) y.set(i, gelu_erf(x[i]));
  });
}

void CpuBackend::bwd_GeluErf(const OpArgs& a) {
  const char* op = "gelu_erf_bwd";
  const std::int64_t n = a.M;
  const bool acc = a.acc[0];
  check_n(n, op);
  cpu::check_float(*a.in[0], op, "x", n);
  cpu::check_float(*a.dout[0], op, "dy", n);
  cpu::check_float(*a.din[0], op, "dx", n);
  FV x(*a.in[0]), dy(*a.dout[0]), dx(*a.din[0]);
  const cpu::simd::Kernels* k = cpu::simd::active();
  cpu::parallel_for(*pool_, n, kGrain, [&](std::int64_t b, std::int64_t e, int) {
    if (k) return k->gelu(cpu::simd::Act::kGeluErf, x.ref(), dy.ref(), dx.ref(), b, e, acc);
    for (std::int64_t i = b; i < e; ++i) dx.put(i, dy[i] * gelu_erf_grad(x[i]), acc);
  });
}

}  // namespace remat
