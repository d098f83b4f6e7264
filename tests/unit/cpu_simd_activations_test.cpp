// The SIMD activation, gated-activation, RoPE and softmax kernels (cpu_simd_activations.cpp)
// against the scalar reference loops, on every kernel set this CPU runs, over sizes that leave a
// tail on every vector width. Each output stays within a stated bound of the reference (the
// kernels' exp and erf are SLEEF's, the reference's glibc's; softmax sums are split in 16 parts),
// RoPE gives the reference's bits, and every set gives the same bits with 1 and 3 threads.
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_simd.h"
#include "tests/unit/cpu_simd_test_util.h"
#include "tests/unit/cpu_test_util.h"

namespace remat {
namespace {

using cputest::Env;
using cputest::randv;
using simdtest::as_floats;
using simdtest::awkward;
using simdtest::elem_ulps;
using simdtest::Outputs;
using simdtest::per_set;

struct Out {
  const char* name;
  bool bf;       // a bf16 output: distances in bf16 steps
  double bound;  // largest distance from the reference (elem_ulps with the floor)
};

// run(threads) on every set with 1 and 3 threads; checks each output against its bound and the
// thread counts against each other, and returns the largest distance seen.
double check_sets(const std::string& what, const std::function<Outputs(int)>& run,
                  const std::vector<Out>& outs, double floor) {
  int threads = 1;
  const auto r1 = per_set([&] { return run(threads); });
  threads = 3;
  const auto r3 = per_set([&] { return run(threads); });
  EXPECT_GE(r1.size(), 2u) << "no SIMD set runs on this CPU";
  double worst = 0.0;
  for (std::size_t s = 0; s < r1.size(); ++s)
    for (std::size_t t = 0; t < outs.size(); ++t) {
      EXPECT_TRUE(r1[s].second[t] == r3[s].second[t])
          << what << " " << outs[t].name << " on " << r1[s].first << ": 1 and 3 threads differ";
      if (s == 0) continue;
      const double u = elem_ulps(as_floats(r1[s].second[t], outs[t].bf),
                                 as_floats(r1[0].second[t], outs[t].bf), floor,
                                 outs[t].bf ? 1.0 / 128 : FLT_EPSILON);
      EXPECT_LE(u, outs[t].bound) << what << " " << outs[t].name << " on " << r1[s].first;
      worst = std::max(worst, u);
    }
  std::printf("%s: largest distance from the reference %.2f\n", what.c_str(), worst);
  return worst;
}

const char* dname(DType d) { return d == DType::BF16 ? "bf16" : "f32"; }

// GELU (tanh and erf), forward and backward with and without accumulation, fp32 and bf16.
// Distances relative to max(|ref|, 1): small outputs come from 1 + tanh or 1 + erf near 0,
// where any 1-ulp function error is amplified the same way in the reference.
constexpr double kGeluUlps = 4.0;  // measured: 1.0
TEST(CpuSimdActivations, GeluStaysWithinItsBoundOfTheReference) {
  const std::int64_t n = 3000 + 13;
  for (DType dt : {DType::F32, DType::BF16}) {
    const bool bf = dt == DType::BF16;
    auto run = [&](int threads) {
      Env env(threads);
      Tensor x = env.from(awkward(n, 41), dt), dy = env.from(randv(n, 42), dt);
      Tensor y1 = env.make(dt, n), y2 = env.make(dt, n);
      Tensor d1 = env.from(randv(n, 43), dt), d2 = env.from(randv(n, 43), dt);
      Tensor d3 = env.make(dt, n), d4 = env.make(dt, n);
      env.be.gelu_fwd(x, y1, n);
      env.be.gelu_bwd(x, dy, d1, n, true);
      env.be.gelu_bwd(x, dy, d3, n, false);
      env.be.run(OpKind::GeluErf, Pass::Forward, cputest::act_args(x, y2, n));
      env.be.run(OpKind::GeluErf, Pass::Backward, cputest::act_bwd_args(x, dy, d2, n, 1, true));
      env.be.run(OpKind::GeluErf, Pass::Backward, cputest::act_bwd_args(x, dy, d4, n, 1, false));
      return Outputs{env.bytes(y1), env.bytes(d1), env.bytes(d3), env.bytes(y2), env.bytes(d2),
                     env.bytes(d4)};
    };
    const double b = bf ? 1.0 : kGeluUlps;
    check_sets(std::string("gelu ") + dname(dt), run,
               {{"tanh y", bf, b}, {"tanh dx acc", bf, b}, {"tanh dx", bf, b},
                {"erf y", bf, b}, {"erf dx acc", bf, b}, {"erf dx", bf, b}},
               1.0);
  }
}

// SwiGLU and GeGLU forward and backward, F odd, gates and ups in [-6, 6]. Distances relative to
// max(|ref|, 8): a 1-ulp difference of tanh or exp near their limits is multiplied by up to
// |gate * up| / 2, in the reference as here (SLEEF's four-, eight- and one-lane tanh round
// tanh(-8.2) to -1 or to the float below it).
constexpr double kGluUlps = 8.0;  // measured: 4.25 (GeGLU dgu, one-lane set)
TEST(CpuSimdActivations, GatedActivationsStayWithinTheirBoundOfTheReference) {
  const std::int64_t rows = 5;
  const int F = 203;
  for (DType dt : {DType::F32, DType::BF16})
    for (bool acc : {false, true}) {
      const bool bf = dt == DType::BF16;
      auto run = [&](int threads) {
        Env env(threads);
        Tensor gu = env.from(randv(rows * 2 * F, 51, -6.0f, 6.0f), dt);
        Tensor dy = env.from(randv(rows * F, 52), dt);
        Tensor y1 = env.make(dt, rows * F), y2 = env.make(dt, rows * F);
        Tensor d1 = env.from(randv(rows * 2 * F, 53), dt), d2 = env.from(randv(rows * 2 * F, 53), dt);
        env.be.swiglu_fwd(gu, y1, rows, F);
        env.be.swiglu_bwd(gu, dy, d1, rows, F, acc);
        env.be.run(OpKind::GeGlu, Pass::Forward, cputest::act_args(gu, y2, rows, F));
        env.be.run(OpKind::GeGlu, Pass::Backward, cputest::act_bwd_args(gu, dy, d2, rows, F, acc));
        return Outputs{env.bytes(y1), env.bytes(d1), env.bytes(y2), env.bytes(d2)};
      };
      const double b = bf ? 1.0 : kGluUlps;
      check_sets(std::string("glu ") + dname(dt) + (acc ? " acc" : ""), run,
                 {{"swiglu y", bf, b}, {"swiglu dgu", bf, b}, {"geglu y", bf, b}, {"geglu dgu", bf, b}},
                 8.0);
    }
}

// RoPE: the reference's operations in its order, so its bits on every set; partial rotary dims
// and head dims whose half leaves a tail.
TEST(CpuSimdActivations, RopeGivesTheReferenceBits) {
  for (int d : {22, 64})
    for (DType dt : {DType::F32, DType::BF16}) {
      AttnDims a;
      a.B = 2, a.S = 7, a.heads = 4, a.kv_heads = 2, a.d = d;
      const std::int64_t n = static_cast<std::int64_t>(a.B) * a.S * (a.heads + 2 * a.kv_heads) * d;
      RopeFrequencies freqs;
      RopeTable full = cputest::default_rope(freqs, d, 10000.0f), part = full;
      part.rotary_dim = d / 2 + (d / 2) % 2;
      auto run = [&](int threads) {
        Env env(threads);
        Tensor x = env.from(randv(n, 61, -3.0f, 3.0f), dt);
        Tensor y1 = env.make(dt, n), y2 = env.make(dt, n), g = env.from(randv(n, 62), dt);
        Tensor d1 = env.from(randv(n, 63), dt), d2 = env.make(dt, n);
        env.be.rope_fwd(x, y1, a, full);
        env.be.rope_fwd(x, y2, a, part);
        env.be.rope_bwd(g, d1, a, full, true);
        env.be.rope_bwd(g, d2, a, part, false);
        return Outputs{env.bytes(y1), env.bytes(y2), env.bytes(d1), env.bytes(d2)};
      };
      SCOPED_TRACE("d=" + std::to_string(d) + " " + dname(dt));
      const double worst = check_sets("rope", run, {{"y", false, 0.0}, {"y partial", false, 0.0},
                                                    {"dx acc", false, 0.0}, {"dx partial", false, 0.0}},
                                      1.0);
      EXPECT_EQ(worst, 0.0);
    }
}

AttnDims attn(int S, int window, float softcap) {
  AttnDims a;
  a.B = 2, a.S = S, a.heads = 4, a.kv_heads = 2, a.d = 16;
  a.scale = 1.0f / 4.0f;
  a.window = window;
  a.softcap = softcap;
  return a;
}

// Naive attention's softmax forward and backward and flash attention's forward (with dropout),
// causal, with a sliding window and with a soft cap; S = 37 leaves tails.
constexpr double kSoftmaxUlps = 8.0;  // measured: 2.7
TEST(CpuSimdActivations, AttentionSoftmaxStaysWithinItsBoundOfTheReference) {
  for (int window : {0, 5})
    for (float cap : {0.0f, 20.0f}) {
      const AttnDims a = attn(37, window, cap);
      const std::int64_t nq = static_cast<std::int64_t>(a.B) * a.S * (a.heads + 2 * a.kv_heads) * a.d;
      const std::int64_t np = static_cast<std::int64_t>(a.B) * a.heads * a.S * a.S;
      const std::int64_t nc = static_cast<std::int64_t>(a.B) * a.S * a.heads * a.d;
      auto run = [&](int threads) {
        Env env(threads);
        Tensor qkv = env.from(randv(nq, 71, -2.0f, 2.0f)), P = env.make(DType::F32, np);
        Tensor dP = env.from(randv(np, 72)), dq = env.from(randv(nq, 73));
        env.be.attn_softmax_fwd(qkv, P, a);
        env.be.attn_softmax_bwd(qkv, P, dP, dq, a);
        Tensor ctx = env.make(DType::F32, nc), lse = env.make(DType::F32, a.B * a.heads * a.S);
        env.be.flash_fwd(qkv, ctx, lse, a, DropoutKey{3, 1, 2, 5}, 0.1f);
        Tensor ctx0 = env.make(DType::F32, nc), lse0 = env.make(DType::F32, a.B * a.heads * a.S);
        env.be.flash_fwd(qkv, ctx0, lse0, a, DropoutKey{}, 0.0f);
        return Outputs{env.bytes(P), env.bytes(dq), env.bytes(ctx), env.bytes(lse),
                       env.bytes(ctx0), env.bytes(lse0)};
      };
      const double b = kSoftmaxUlps;
      check_sets("softmax window " + std::to_string(window) + " cap " + std::to_string(cap), run,
                 {{"probs", false, b}, {"dqkv", false, b}, {"flash ctx p=0.1", false, b},
                  {"flash lse p=0.1", false, b}, {"flash ctx", false, b}, {"flash lse", false, b}},
                 1.0);
    }
}

}  // namespace
}  // namespace remat
