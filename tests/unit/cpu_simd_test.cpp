// The SIMD kernel sets (core/backend/cpu/cpu_simd.h) against the scalar reference loops, on
// every set this CPU runs. Element-wise ops and AdamW must give the reference's bits; the norms
// (16 fixed partial sums instead of one sequential sum) stay within a stated bound of it, and give
// the same bits on every target.
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/backend/cpu/cpu_simd.h"
#include "tests/unit/cpu_simd_test_util.h"
#include "tests/unit/cpu_test_util.h"

namespace remat {
namespace {

using cputest::Env;
using cputest::randv;
using simdtest::ActiveGuard;
using simdtest::as_floats;
using simdtest::awkward;
using simdtest::expect_same_bytes;
using simdtest::Outputs;
using simdtest::per_set;
using simdtest::row_ulps;
namespace simd = cpu::simd;

TEST(CpuSimd, SelectionByName) {
  ActiveGuard g;
  const std::vector<const simd::Kernels*> all = simd::available();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(simd::by_name("scalar"), nullptr);
  EXPECT_EQ(simd::by_name("best"), all.front());
  EXPECT_NE(simd::by_name("baseline"), nullptr);
  EXPECT_EQ(simd::by_name(all.back()->name), all.back());
  EXPECT_THROW(simd::by_name("avx9000"), Error);
  simd::set_active(all.back());
  EXPECT_EQ(simd::active_name(), all.back()->name);
  simd::set_active(nullptr);
  EXPECT_EQ(simd::active_name(), "scalar");
  Env env(1);
  bool found = false;
  for (const auto& [k, v] : env.be.describe())
    if (k == "simd_target") found = (v == "scalar");
  EXPECT_TRUE(found) << "describe() records the active set as simd_target";
}

// Every element-wise op, each dtype pair, with and without mask and accumulation, over a length
// that leaves a tail on every vector width.
TEST(CpuSimd, ElementwiseOpsGiveTheReferenceBits) {
  const std::int64_t n = 1000 + 13;
  const float p = 0.25f;
  for (DType dx : {DType::F32, DType::BF16})
    for (DType dy : {DType::F32, DType::BF16})
      for (bool acc : {false, true}) {
        auto run = [&] {
          Env env(2);
          Tensor x = env.from(awkward(n, 1), dx), y = env.from(awkward(n, 2), dy);
          Tensor r = env.from(awkward(n, 3), dx), z = env.from(awkward(n, 4), dy);
          Tensor mask = env.make(DType::U8, n);
          env.be.dropout_mask(mask, DropoutKey{9, 2, 1, 3}, p, n);
          Tensor c1 = env.from(awkward(n, 5), dy), c2 = env.from(awkward(n, 5), dy);
          env.be.cast(c1, x);
          env.be.add_into(c2, x);
          Tensor d1 = env.from(awkward(n, 6), dy), d2 = env.from(awkward(n, 6), dy);
          env.be.dropout_fwd(x, mask, d1, p, n);
          env.be.dropout_bwd(x, mask, d2, p, n, acc);
          Tensor d3 = env.from(awkward(n, 7), dy);
          env.be.dropout_bwd(x, Tensor{}, d3, 0.0f, n, acc);  // no mask
          Tensor o1 = env.make(dy, n), o2 = env.make(dy, n);
          env.be.residual_fwd(r, x, &mask, o1, p, n);
          env.be.residual_fwd(r, x, nullptr, o2, 0.0f, n);
          env.be.residual_bwd(x, &mask, y, z, p, n, acc, !acc);
          Tensor a = env.from(awkward(n, 8), dx);  // dres aliasing dout
          Tensor b = env.from(awkward(n, 9), dx);
          env.be.residual_bwd(a, &mask, a, b, p, n, acc, acc);
          return Outputs{env.bytes(c1), env.bytes(c2), env.bytes(d1), env.bytes(d2),
                         env.bytes(d3), env.bytes(o1), env.bytes(o2), env.bytes(y),
                         env.bytes(z), env.bytes(a), env.bytes(b)};
        };
        SCOPED_TRACE(std::string(dx == DType::BF16 ? "bf16" : "f32") + " -> " +
                     (dy == DType::BF16 ? "bf16" : "f32") + (acc ? ", acc" : ""));
        expect_same_bytes(per_set(run), "element-wise");
      }
}

TEST(CpuSimd, AdamWGivesTheReferenceBits) {
  const std::int64_t n = 3000 + 5;
  for (bool bf : {false, true}) {
    auto run = [&] {
      Env env(2);
      const DType dt = bf ? DType::BF16 : DType::F32;
      std::vector<float> p0 = randv(n, 11, -2.0f, 2.0f);
      Tensor params = env.from(p0, dt), master = env.from(p0), grads = env.from(awkward(n, 12), dt);
      std::vector<float> v0 = randv(n, 13, 0.0f, 1e-2f);
      Tensor m = env.from(randv(n, 14, -0.1f, 0.1f)), v = env.from(v0);
      const std::vector<AdamSegment> segs = {{0, 1000, true}, {1000, 7, false}, {1007, n - 1007, true}};
      AdamArgs args;
      for (int t = 1; t <= 3; ++t) {
        args.t = t;
        env.be.adamw(params, grads, bf ? &master : nullptr, m, v, segs, args);
      }
      return Outputs{env.bytes(params), env.bytes(master), env.bytes(m), env.bytes(v)};
    };
    SCOPED_TRACE(bf ? "bf16 with master" : "fp32");
    expect_same_bytes(per_set(run), "adamw");
  }
}

// The first step's AdamW (AdamArgs::zero_moments) on moments poisoned with NaN gives the bits of
// the same step on zero-filled moments, on the reference and every set, and so does the step
// after it (which reads what the first wrote). The gradients include signed zeros, subnormals and
// -denorm_min, whose (1 - beta1) g rounds to -0 (0 + (-0) is +0: the sum must stay).
TEST(CpuSimd, AdamWOnZeroMomentsGivesTheZeroFilledBits) {
  const std::int64_t n = 3000 + 5;
  std::vector<float> g = awkward(n, 12);
  for (std::int64_t i = 3; i < n; i += 17) g[static_cast<std::size_t>(i)] = -std::numeric_limits<float>::denorm_min();
  for (std::int64_t i = 5; i < n; i += 19) g[static_cast<std::size_t>(i)] = -0.0f;
  for (bool bf : {false, true}) {
    auto run = [&](bool zero) {
      return [&, zero] {
        Env env(2);
        const DType dt = bf ? DType::BF16 : DType::F32;
        std::vector<float> p0 = randv(n, 11, -2.0f, 2.0f);
        Tensor params = env.from(p0, dt), master = env.from(p0), grads = env.from(g, dt);
        const float fill = zero ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
        Tensor m = env.from(std::vector<float>(static_cast<std::size_t>(n), fill));
        Tensor v = env.from(std::vector<float>(static_cast<std::size_t>(n), fill));
        const std::vector<AdamSegment> segs = {{0, 1000, true}, {1000, 7, false}, {1007, n - 1007, true}};
        AdamArgs args;
        args.zero_moments = zero;
        env.be.adamw(params, grads, bf ? &master : nullptr, m, v, segs, args);
        Outputs o{env.bytes(params), env.bytes(master), env.bytes(m), env.bytes(v)};
        args.t = 2;
        args.zero_moments = false;
        env.be.adamw(params, grads, bf ? &master : nullptr, m, v, segs, args);
        for (const Tensor* t : {&params, &master, &m, &v}) o.push_back(env.bytes(*t));
        return o;
      };
    };
    SCOPED_TRACE(bf ? "bf16 with master" : "fp32");
    const auto filled = per_set(run(false)), unread = per_set(run(true));
    ASSERT_EQ(filled.size(), unread.size());
    for (std::size_t s = 0; s < filled.size(); ++s)
      for (std::size_t t = 0; t < filled[s].second.size(); ++t)
        EXPECT_TRUE(unread[s].second[t] == filled[s].second[t])
            << "output " << t << " on " << filled[s].first << " differs with zero_moments";
    expect_same_bytes(unread, "adamw zero_moments");
    // The poison would show: a NaN moment read makes NaN parameters.
    std::size_t nan = 0;
    for (float x : as_floats(unread[0].second[2], false)) nan += std::isnan(x);
    EXPECT_LT(nan, 100u);
  }
}

// LayerNorm and RMSNorm forward and backward in fp32: every output within kNormUlps of the
// reference (row-relative, see row_ulps), and all SIMD sets bitwise equal to one another.
constexpr double kNormUlps = 8.0;  // measured: 3.8 at H = 768

TEST(CpuSimd, NormsStayWithinTheirBoundOfTheReference) {
  for (int H : {768, 37, 16}) {
    const std::int64_t rows = 9;
    auto run = [&] {
      Env env(2);
      const std::int64_t n = rows * H;
      Tensor x = env.from(randv(n, 21, -3.0f, 5.0f)), w = env.from(randv(H, 22, 0.5f, 1.5f));
      Tensor b = env.from(randv(H, 23)), dy = env.from(randv(n, 24));
      Tensor y1 = env.make(DType::F32, n), y2 = env.make(DType::F32, n);
      Tensor dx1 = env.from(randv(n, 25)), dx2 = env.make(DType::F32, n);
      Tensor dw1 = env.from(randv(H, 26)), db1 = env.make(DType::F32, H), dw2 = env.make(DType::F32, H);
      env.be.layernorm_fwd(x, w, b, y1, rows, H, 1e-5f);
      env.be.layernorm_bwd(x, w, dy, dx1, dw1, db1, rows, H, 1e-5f, true);
      env.be.rmsnorm_fwd(x, w, y2, rows, H, 1e-6f, 1.0f);
      env.be.rmsnorm_bwd(x, w, dy, dx2, dw2, rows, H, 1e-6f, false, 1.0f);
      return Outputs{env.bytes(y1), env.bytes(dx1), env.bytes(dw1), env.bytes(db1),
                     env.bytes(y2), env.bytes(dx2), env.bytes(dw2)};
    };
    const auto r = per_set(run);
    ASSERT_GE(r.size(), 2u);
    const char* names[] = {"ln y", "ln dx", "ln dw", "ln db", "rms y", "rms dx", "rms dw"};
    double worst = 0.0;
    for (std::size_t s = 1; s < r.size(); ++s)
      for (std::size_t t = 0; t < r[0].second.size(); ++t) {
        // dw and db are one row of H
        const double u = row_ulps(as_floats(r[s].second[t], false), as_floats(r[0].second[t], false), H);
        EXPECT_LE(u, kNormUlps) << names[t] << " H=" << H << " on " << r[s].first;
        worst = std::max(worst, u);
        EXPECT_TRUE(r[s].second[t] == r[1].second[t])
            << names[t] << " H=" << H << ": " << r[s].first << " differs from " << r[1].first;
      }
    std::printf("norms H=%d: largest difference from the reference %.2f (row-relative ulps)\n", H, worst);
    // The sums' order differs from the reference's, so with these inputs some output does too:
    // equal bits everywhere would mean the kernels did not run.
    if (H == 768) EXPECT_GT(worst, 0.0);
  }
}

// bf16 norms: the same bound before the rounding, so at most one bf16 step apart.
TEST(CpuSimd, Bf16NormsAreAtMostOneRoundingApart) {
  const int H = 768;
  const std::int64_t rows = 6, n = rows * H;
  auto run = [&] {
    Env env(2);
    Tensor x = env.from(randv(n, 31, -2.0f, 2.0f), DType::BF16);
    Tensor w = env.from(randv(H, 32, 0.5f, 1.5f), DType::BF16), b = env.from(randv(H, 33), DType::BF16);
    Tensor y = env.make(DType::BF16, n);
    env.be.layernorm_fwd(x, w, b, y, rows, H, 1e-5f);
    return Outputs{env.bytes(y)};
  };
  const auto r = per_set(run);
  for (std::size_t s = 1; s < r.size(); ++s) {
    const std::vector<float> got = as_floats(r[s].second[0], true), ref = as_floats(r[0].second[0], true);
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const float step = std::fabs(round_bf16(ref[i] * (1.0f + 1.0f / 128)) - ref[i]);
      ASSERT_LE(std::fabs(got[i] - ref[i]), std::max(step, 1e-6f)) << "element " << i << " on " << r[s].first;
    }
  }
}

}  // namespace
}  // namespace remat
