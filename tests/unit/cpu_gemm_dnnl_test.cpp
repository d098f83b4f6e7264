// The bf16 GEMM path through oneDNN against the fp32 sgemm reference: odd shapes, every
// transpose, strided operands, accumulation; the same bits on two runs at two threads (skipped
// where oneDNN has no bf16 matmul: a CPU without AVX-512); a bad REMAT_GEMM refused with a
// message that names the choices, and REMAT_GEMM=dnnl where oneDNN cannot run it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_dnnl.h"
#include "core/backend/cpu/cpu_gemm_parts.h"
#include "core/util/bf16.h"
#include "core/util/error.h"
#include "cpu_test_util.h"

namespace remat {
namespace {

using cputest::Env;
using cputest::randv;

// Values a bf16 holds exactly, as bf16 bits and as fp32.
struct Bf16Matrix {
  std::vector<std::uint16_t> bits;
  std::vector<float> f32;
  Bf16Matrix(std::size_t n, std::uint32_t seed) : bits(n), f32(n) {
    const std::vector<float> v = randv(n, seed);
    for (std::size_t i = 0; i < n; ++i) bits[i] = float_to_bf16(v[i]), f32[i] = bf16_to_float(bits[i]);
  }
};

// oneDNN 2.6 has no bf16 matmul on a CPU without AVX-512: the comparisons need one.
#define REMAT_REQUIRE_DNNL()                                                  \
  do {                                                                        \
    std::string why_;                                                         \
    if (!cpu::dnnl_matmul_available(&why_)) GTEST_SKIP() << why_;             \
  } while (0)

// Holds the active path for one test and puts the previous one back.
struct PathScope {
  cpu::GemmPath before = cpu::gemm_path();
  explicit PathScope(cpu::GemmPath p) { cpu::set_gemm_path(p); }
  ~PathScope() { cpu::set_gemm_path(before); }
};

// The products are exact in fp32 (bf16 x bf16), so the two paths differ only by the order of the
// K additions: each sum of K terms is within K * 2^-24 * sum |a b| of the exact one, and the two
// within twice that.
TEST(CpuGemmDnnl, MatchesSgemmOnOddShapesTransposesStridesAndAccumulation) {
  REMAT_REQUIRE_DNNL();
  const int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 65, 17}, {65, 130, 200}, {130, 33, 64}, {64, 64, 513}};
  int cases = 0;
  for (const auto& s : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int pad : {0, 3})  // extra elements per stored row: strided operands and output
          for (float beta : {0.0f, 1.0f}) {
            const int M = s[0], N = s[1], K = s[2];
            const int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
            const Bf16Matrix A(static_cast<std::size_t>(ta ? K : M) * lda, 1 + cases),
                B(static_cast<std::size_t>(tb ? N : K) * ldb, 100 + cases);
            const std::vector<float> C0 = randv(static_cast<std::size_t>(M) * ldc, 200 + cases);
            std::vector<float> ours = C0, ref = C0;
            cpu::bgemm1(ta, tb, M, N, K, A.bits.data(), lda, B.bits.data(), ldb, beta, ours.data(), ldc);
            cpu::sgemm1(ta, tb, M, N, K, A.f32.data(), lda, B.f32.data(), ldb, beta, ref.data(), ldc);
            for (int m = 0; m < M; ++m) {
              for (int n = 0; n < N; ++n) {
                double mag = beta * std::fabs(C0[static_cast<std::size_t>(m) * ldc + n]);
                for (int k = 0; k < K; ++k) {
                  const float a = ta ? A.f32[static_cast<std::size_t>(k) * lda + m] : A.f32[static_cast<std::size_t>(m) * lda + k];
                  const float b = tb ? B.f32[static_cast<std::size_t>(n) * ldb + k] : B.f32[static_cast<std::size_t>(k) * ldb + n];
                  mag += std::fabs(static_cast<double>(a) * b);
                }
                const double bound = 2.0 * (K + 1) * std::ldexp(1.0, -24) * mag + 1e-30;
                const std::size_t i = static_cast<std::size_t>(m) * ldc + n;
                ASSERT_LE(std::fabs(static_cast<double>(ours[i]) - ref[i]), bound)
                    << M << "x" << N << "x" << K << " ta " << ta << " tb " << tb << " pad " << pad
                    << " beta " << beta << " at " << m << "," << n;
              }
              for (int n = N; n < ldc; ++n)  // the padding is never written
                ASSERT_EQ(ours[static_cast<std::size_t>(m) * ldc + n], C0[static_cast<std::size_t>(m) * ldc + n]);
            }
            ++cases;
          }
  EXPECT_EQ(cases, 6 * 2 * 2 * 2 * 2);
}

struct Outputs {
  std::vector<std::uint8_t> y, dx, dW, db, loss, hdx, hdW;
};

// A bf16 linear layer forward and backward (accumulating) and a head on one backend.
Outputs bf16_ops(int threads) {
  const std::int64_t M = 160;
  const int K = 200, N = 330, V = 300;
  const DType bf = DType::BF16;
  Env e(threads, 64u << 20);
  Tensor x = e.from(randv(static_cast<std::size_t>(M * K), 1), bf);
  Tensor W = e.from(randv(static_cast<std::size_t>(N) * K, 2, -0.1f, 0.1f), bf);
  Tensor b = e.from(randv(static_cast<std::size_t>(N), 3), bf);
  Tensor y = e.make(bf, M * N), dy = e.from(randv(static_cast<std::size_t>(M * N), 4), bf);
  Tensor dx = e.from(randv(static_cast<std::size_t>(M * K), 5), bf);
  Tensor dW = e.from(randv(static_cast<std::size_t>(N) * K, 6, -0.01f, 0.01f), bf);
  Tensor db = e.make(bf, N);
  e.be.linear_fwd(x, W, &b, y, M, K, N);
  e.be.linear_bwd(x, W, dy, &dx, dW, &db, M, K, N, true);
  Tensor HW = e.from(randv(static_cast<std::size_t>(V) * K, 7, -0.2f, 0.2f), bf);
  std::vector<std::int32_t> tg(static_cast<std::size_t>(M));
  for (std::size_t i = 0; i < tg.size(); ++i) tg[i] = static_cast<std::int32_t>((i * 37) % V);
  Tensor t = e.ints(tg), losses = e.make(DType::F32, M), hdx = e.make(bf, M * K);
  Tensor hdW = e.make(bf, static_cast<std::int64_t>(V) * K);
  e.be.head_loss(x, HW, t, losses, hdx, hdW, M, K, V, 1.0f / static_cast<float>(M), 0.0f, 1.0f);
  return {e.bytes(y), e.bytes(dx), e.bytes(dW), e.bytes(db), e.bytes(losses), e.bytes(hdx), e.bytes(hdW)};
}

double max_rel(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b, bool bf) {
  auto at = [&](const std::vector<std::uint8_t>& v, std::size_t i) {
    if (bf) {
      std::uint16_t h;
      std::memcpy(&h, v.data() + 2 * i, 2);
      return static_cast<double>(bf16_to_float(h));
    }
    float f;
    std::memcpy(&f, v.data() + 4 * i, 4);
    return static_cast<double>(f);
  };
  const std::size_t n = a.size() / (bf ? 2 : 4);
  double big = 0, diff = 0;
  for (std::size_t i = 0; i < n; ++i)
    big = std::max(big, std::fabs(at(a, i))), diff = std::max(diff, std::fabs(at(a, i) - at(b, i)));
  return diff / std::max(big, 1e-30);
}

TEST(CpuGemmDnnl, Bf16OpsGiveTheSameBitsOnTwoRunsAtTwoThreadsAndAgreeWithSgemm) {
  REMAT_REQUIRE_DNNL();
  Outputs ref;
  {
    PathScope p(cpu::GemmPath::OpenBlas);
    ref = bf16_ops(2);
  }
  PathScope p(cpu::GemmPath::Dnnl);
  const Outputs a = bf16_ops(2), b = bf16_ops(2);
  EXPECT_EQ(a.y, b.y);
  EXPECT_EQ(a.dx, b.dx);
  EXPECT_EQ(a.dW, b.dW);
  EXPECT_EQ(a.db, b.db);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.hdx, b.hdx);
  EXPECT_EQ(a.hdW, b.hdW);
  // Against the sgemm path: the same bf16 operands, fp32 sums in another order, then one
  // rounding to bf16 (2^-8 relative) that may fall either side.
  const double tol = 1.0 / 64;
  EXPECT_LT(max_rel(a.y, ref.y, true), tol);
  EXPECT_LT(max_rel(a.dx, ref.dx, true), tol);
  EXPECT_LT(max_rel(a.dW, ref.dW, true), tol);
  EXPECT_EQ(a.db, ref.db);  // column sums of dy: our own loop on either path
  EXPECT_LT(max_rel(a.loss, ref.loss, false), 1e-4);
  EXPECT_LT(max_rel(a.hdx, ref.hdx, true), tol);
  EXPECT_LT(max_rel(a.hdW, ref.hdW, true), tol);
  // And it is another path: some outputs differ in their bits.
  EXPECT_TRUE(a.y != ref.y || a.dx != ref.dx || a.dW != ref.dW);
}

TEST(CpuGemmDnnl, PathNamesAreParsedAndABadOneIsRefused) {
  EXPECT_EQ(cpu::gemm_path_from("openblas"), cpu::GemmPath::OpenBlas);
  std::string why;
  if (cpu::dnnl_matmul_available(&why)) {
    EXPECT_EQ(cpu::gemm_path_from("dnnl"), cpu::GemmPath::Dnnl);
  } else {  // refused with the reason, never a failure at the first GEMM
    EXPECT_FALSE(cpu::dnnl_has_bf16_kernel());
    try {
      cpu::gemm_path_from("dnnl");
      ADD_FAILURE() << "REMAT_GEMM=dnnl was accepted where oneDNN has no bf16 matmul";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("REMAT_GEMM=dnnl: oneDNN's bf16 matmul is unavailable"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(cpu::gemm_path_from("auto"),
            cpu::dnnl_has_bf16_kernel() ? cpu::GemmPath::Dnnl : cpu::GemmPath::OpenBlas);
  try {
    cpu::gemm_path_from("mkl");
    FAIL() << "REMAT_GEMM=mkl was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("REMAT_GEMM"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'mkl'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("openblas"), std::string::npos) << msg;
  }
  EXPECT_THROW(cpu::gemm_path_from("DNNL"), Error);
}

TEST(CpuGemmDnnl, ProvenanceNamesThePath) {
  Env e(2, 0);
  for (cpu::GemmPath p : {cpu::GemmPath::OpenBlas, cpu::GemmPath::Dnnl}) {
    PathScope scope(p);
    std::string gemm;
    for (const auto& [k, v] : e.be.describe())
      if (k == "gemm") gemm = v;
    EXPECT_EQ(gemm.rfind(p == cpu::GemmPath::Dnnl ? "dnnl " : "openblas", 0), 0u) << gemm;
  }
}

}  // namespace
}  // namespace remat
