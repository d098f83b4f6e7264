// The fused head's cross-entropy rows (cpu_cross_entropy.cpp) on every SIMD kernel set this CPU
// runs against the scalar reference: vocabulary sizes that leave a tail on every vector width,
// with and without a soft cap. The loss and the gradient stay within a stated bound of the
// reference (SLEEF's exp against glibc's, sums in 16 parts against one running sum), and the
// head gives the same bits with 1 and 3 threads on each set.
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_common.h"
#include "core/backend/cpu/cpu_cross_entropy.h"
#include "core/backend/cpu/cpu_simd.h"
#include "tests/unit/cpu_simd_test_util.h"
#include "tests/unit/cpu_test_util.h"

namespace remat {
namespace {

using cputest::Env;
using cputest::randv;
using simdtest::ActiveGuard;
using simdtest::elem_ulps;
namespace simd = cpu::simd;

// Distances in units of FLT_EPSILON times max(|value|, floor). The loss: against the exact
// (double) loss with the floor 1, within kLossUlps, and no farther from the reference than the
// reference is from the exact loss plus kLossUlps (the reference's one running sum over a large
// vocabulary is off by more: 37 at 50257). The gradient: against the reference with the floor
// scale / 64 (under which the reference's 1 / sum carries its running sum's error), within
// kGradUlps; against the exact gradient with the floor 1e-9 * scale, within grad_exact_ulps(V):
// every element carries the relative error of the sum, whose 16 running sums of V / 16 terms
// round by about the square root of their length.
constexpr double kLossUlps = 4.0;   // measured: 2.50
constexpr double kGradUlps = 16.0;  // measured: 9.00
constexpr double kTinyGrad = 1e-9;
double grad_exact_ulps(int V) { return 12.0 + std::sqrt(V / 16.0); }  // measured: 31.65 at 50257, 8.32 at 1003

struct Row {
  float loss;
  std::vector<float> grad;
};

// The loss and gradient in double precision over the same logits (after the soft cap's tanh,
// which both paths share), the gradient rounded to float.
Row exact_row(std::vector<float> l, int target, float scale, float cap, double& loss) {
  const int V = static_cast<int>(l.size());
  if (cap > 0.0f) cpu::tanh_of_quotient(l.data(), V, cap);
  const double a = cap > 0.0f ? cap : 1.0;
  double mx = -INFINITY, sum = 0.0;
  for (float v : l) mx = std::max(mx, v * a);
  for (float v : l) sum += std::exp(v * a - mx);
  loss = mx + std::log(sum) - l[target] * a;
  Row r{static_cast<float>(loss), std::vector<float>(l.size())};
  for (int j = 0; j < V; ++j) {
    const double g = (std::exp(l[j] * a - mx) / sum - (j == target ? 1.0 : 0.0)) * scale;
    r.grad[j] = static_cast<float>(cap > 0.0f ? g * (1.0 - double(l[j]) * l[j]) : g);
  }
  return r;
}

Row run_row(const std::vector<float>& logits, int target, float scale, float cap, bool reference) {
  Row r{0.0f, logits};
  const int V = static_cast<int>(logits.size());
  r.loss = reference ? cpu::cross_entropy_row_reference(r.grad.data(), V, target, scale, cap)
                     : cpu::cross_entropy_row(r.grad.data(), V, target, scale, cap);
  return r;
}

TEST(CpuSimdCrossEntropy, RowsStayWithinTheirBoundOfTheReference) {
  ActiveGuard guard;
  const float scale = 1.0f / 128.0f;
  double worst_loss = 0.0, worst_grad = 0.0, worst_exact = 0.0;
  for (int V : {1, 7, 17, 33, 1003, 50257})
    for (float cap : {0.0f, 30.0f}) {
      const std::vector<float> logits = randv(static_cast<std::size_t>(V), 91 + V, -8.0f, 8.0f);
      for (int target : {0, V / 2, V - 1}) {
        const Row ref = run_row(logits, target, scale, cap, true);
        ASSERT_TRUE(std::isfinite(ref.loss));
        double exact = 0.0;
        const Row ex = exact_row(logits, target, scale, cap, exact);
        const double unit = FLT_EPSILON * std::max(std::fabs(exact), 1.0);
        const double ref_off = std::fabs(ref.loss - exact) / unit;
        for (const simd::Kernels* k : simd::available()) {
          simd::set_active(k);
          const Row got = run_row(logits, target, scale, cap, false);
          const std::string what = std::string(k->name) + " V " + std::to_string(V) + " cap " +
                                   std::to_string(cap) + " target " + std::to_string(target);
          const double ul = std::fabs(got.loss - exact) / unit;
          const double ug = elem_ulps(got.grad, ref.grad, scale / 64.0);
          const double ue = elem_ulps(got.grad, ex.grad, kTinyGrad * scale);
          EXPECT_LE(ul, kLossUlps) << what << " loss " << got.loss << " vs " << exact;
          EXPECT_LE(std::fabs(got.loss - ref.loss) / unit, ref_off + kLossUlps) << what;
          EXPECT_LE(ug, kGradUlps) << what << " gradient against the reference";
          EXPECT_LE(ue, grad_exact_ulps(V)) << what << " gradient against the exact one";
          // the gradient of the target's logit carries the -1 of the one-hot (one word: 0)
          if (V > 1) EXPECT_LT(got.grad[target], 0.0f) << what;
          else EXPECT_EQ(got.grad[target], 0.0f) << what;
          worst_loss = std::max(worst_loss, ul);
          worst_grad = std::max(worst_grad, ug);
          worst_exact = std::max(worst_exact, ue / grad_exact_ulps(V));
        }
      }
    }
  EXPECT_GE(simd::available().size(), 1u) << "no SIMD set runs on this CPU";
  std::printf("cross-entropy rows: loss %.2f from the exact one; gradient %.2f from the reference, "
              "%.2f of its bound from the exact one\n", worst_loss, worst_grad, worst_exact);
}

// The whole head (logits GEMM, rows, backward GEMMs) on each set: a thread count gives the same
// bits every time, and 1 and 3 threads' losses stay within the rows' bound of each other and of
// the reference's (the lanes' GEMM slices differ with the thread count, and OpenBLAS's kernels
// may sum an output in another order in another slice, so the bits may differ between thread
// counts). 130 rows: two chunks.
TEST(CpuSimdCrossEntropy, HeadIsDeterministicPerSetAndNearTheReference) {
  const int rows = 130, H = 16, V = 1003;
  const float scale = 1.0f / rows;
  std::vector<std::int32_t> tg(rows);
  for (int r = 0; r < rows; ++r) tg[r] = (r * 37 + 5) % V;
  for (float cap : {0.0f, 30.0f}) {
    auto run = [&](int threads) {
      Env e(threads);
      Tensor x = e.from(randv(rows * H, 81, -2.0f, 2.0f)), W = e.from(randv(V * H, 82));
      Tensor t = e.ints(tg), l = e.make(DType::F32, rows);
      Tensor dx = e.make(DType::F32, rows * H), dW = e.make(DType::F32, V * H);
      e.be.head_loss(x, W, t, l, dx, dW, rows, H, V, scale, cap, 1.0f);
      return simdtest::Outputs{e.bytes(l), e.bytes(dx), e.bytes(dW)};
    };
    int threads = 1;
    const auto r1 = simdtest::per_set([&] { return run(threads); });
    threads = 3;
    const auto r3 = simdtest::per_set([&] { return run(threads); });
    const auto r3again = simdtest::per_set([&] { return run(threads); });
    threads = 1;
    const auto r1again = simdtest::per_set([&] { return run(threads); });
    ASSERT_GE(r1.size(), 2u) << "no SIMD set runs on this CPU";
    const std::vector<float> ref = simdtest::as_floats(r1[0].second[0], false);
    for (std::size_t s = 0; s < r1.size(); ++s) {
      for (std::size_t o = 0; o < r1[s].second.size(); ++o) {
        EXPECT_TRUE(r1[s].second[o] == r1again[s].second[o])
            << r1[s].first << " cap " << cap << " output " << o << ": two 1-thread runs differ";
        EXPECT_TRUE(r3[s].second[o] == r3again[s].second[o])
            << r3[s].first << " cap " << cap << " output " << o << ": two 3-thread runs differ";
      }
      const std::vector<float> l1 = simdtest::as_floats(r1[s].second[0], false);
      EXPECT_LE(elem_ulps(l1, ref, 1.0), kLossUlps) << r1[s].first << " cap " << cap << " losses";
      EXPECT_LE(elem_ulps(simdtest::as_floats(r3[s].second[0], false), l1, 1.0), kLossUlps)
          << r3[s].first << " cap " << cap << " losses, 3 threads against 1";
    }
  }
}

}  // namespace
}  // namespace remat
