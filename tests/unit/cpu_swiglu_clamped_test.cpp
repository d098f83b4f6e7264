// gpt-oss's clamped SwiGLU on the CPU backend (core/backend/cpu/cpu_swiglu_clamped.cpp) against
// its formula in double: y = (u + 1) * g * sigmoid(1.702 * g), g = min(gate, limit),
// u = clamp(up, -limit, limit), the clamped values passing no gradient; the gradient also
// against central differences away from the clamps' kinks, in fp32 and bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_common.h"
#include "core/util/error.h"
#include "tests/unit/cpu_test_util.h"

namespace remat {
namespace {

using cputest::Env;

constexpr double kClampAlpha = 1.702;

OpArgs clamped_fwd_args(const Tensor& gu, const Tensor& y, std::int64_t rows, int F, float limit) {
  OpArgs a = cputest::act_args(gu, y, rows, F);
  a.limit = limit;
  return a;
}

OpArgs clamped_bwd_args(const Tensor& gu, const Tensor& dy, const Tensor& dgu, std::int64_t rows, int F, float limit,
                        bool acc) {
  OpArgs a = cputest::act_bwd_args(gu, dy, dgu, rows, F, acc);
  a.limit = limit;
  return a;
}

double clamped_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(CpuSwiGluClamped, ForwardAndBackwardAreTheFormula) {
  Env e;
  const int rows = 7, F = 24;
  const float L = 1.5f;
  // Values from -4 to 4: gates and ups on both sides of the clamps; none within 0.05 of a kink
  // (the central differences below step 0.01 across none).
  std::vector<float> gu = cputest::randv(rows * 2 * F, 71, -4.0f, 4.0f);
  for (float& v : gu)
    for (float k : {-L, L})
      if (std::fabs(v - k) < 0.05f) v = k + (v < k ? -0.05f : 0.05f);
  const std::vector<float> R = cputest::randv(rows * F, 72);
  int gates_clamped = 0, ups_clamped = 0;
  std::vector<double> want(rows * F), dwant(rows * 2 * F);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < F; ++c) {
      const double gate = gu[r * 2 * F + c], up = gu[r * 2 * F + F + c], d = R[r * F + c];
      const double g = std::min(gate, static_cast<double>(L)), u = std::clamp(up, -1.0 * L, 1.0 * L);
      const double s = clamped_sigmoid(kClampAlpha * g);
      want[r * F + c] = (u + 1) * g * s;
      dwant[r * 2 * F + c] = gate <= L ? d * (u + 1) * (s + kClampAlpha * g * s * (1 - s)) : 0.0;
      dwant[r * 2 * F + F + c] = std::fabs(up) <= L ? d * g * s : 0.0;
      gates_clamped += gate > L;
      ups_clamped += std::fabs(up) > L;
    }
  ASSERT_GT(gates_clamped, 0);
  ASSERT_GT(ups_clamped, 0);
  Tensor tgu = e.from(gu), ty = e.make(DType::F32, rows * F);
  auto loss = [&] {
    e.set(tgu, gu);
    e.be.run(OpKind::SwiGluClamped, Pass::Forward, clamped_fwd_args(tgu, ty, rows, F, L));
    return cputest::dotd(e.get(ty), R);
  };
  loss();
  cputest::expect_near_all("y", e.get(ty), want, 1e-6, 1e-5);
  Tensor tdy = e.from(R), tdgu = e.make(DType::F32, rows * 2 * F);
  e.be.run(OpKind::SwiGluClamped, Pass::Backward, clamped_bwd_args(tgu, tdy, tdgu, rows, F, L, false));
  const std::vector<float> dgu = e.get(tdgu);
  cputest::expect_near_all("dgate_up", dgu, dwant, 1e-6, 1e-5);
  cputest::expect_grad("dgate_up", gu, dgu, loss, 1e-2f, 1e-3, 1e-2, 64);
  // acc: the second backward adds the first's again.
  e.be.run(OpKind::SwiGluClamped, Pass::Backward, clamped_bwd_args(tgu, tdy, tdgu, rows, F, L, true));
  std::vector<double> twice(dwant.size());
  for (std::size_t i = 0; i < twice.size(); ++i) twice[i] = 2.0 * dgu[i];
  cputest::expect_near_all("dgate_up acc", e.get(tdgu), twice, 1e-6, 1e-5);
  // bf16: the formula on the rounded inputs, rounded once.
  const std::vector<float> gb = cputest::bf16v(gu);
  Tensor bgu = e.from(gb, DType::BF16), by = e.make(DType::BF16, rows * F);
  e.be.run(OpKind::SwiGluClamped, Pass::Forward, clamped_fwd_args(bgu, by, rows, F, L));
  const std::vector<float> yb = e.get(by);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < F; ++c) {
      const double g = std::min(static_cast<double>(gb[r * 2 * F + c]), 1.0 * L);
      const double u = std::clamp(static_cast<double>(gb[r * 2 * F + F + c]), -1.0 * L, 1.0 * L);
      const double y = (u + 1) * g * clamped_sigmoid(kClampAlpha * g);
      EXPECT_NEAR(yb[r * F + c], y, 1e-6 + std::fabs(y) / 128.0) << r << "," << c;
    }
}

TEST(CpuSwiGluClamped, RefusesALimitThatIsNotPositive) {
  Env e;
  Tensor gu = e.from(std::vector<float>(8, 1.0f)), y = e.make(DType::F32, 4);
  for (float bad : {0.0f, -1.0f, NAN}) {
    try {
      e.be.run(OpKind::SwiGluClamped, Pass::Forward, clamped_fwd_args(gu, y, 2, 2, bad));
      ADD_FAILURE() << "a limit of " << bad << " was accepted";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("limit"), std::string::npos) << err.what();
    }
  }
}

}  // namespace
}  // namespace remat
