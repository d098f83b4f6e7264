// GEMMs split over the pool: the slices cover the output once, in whole units; a linear layer
// and the head give the same bits every time at a given thread count and agree closely across
// thread counts (OpenBLAS may pick other kernels for other slice widths), in bf16 and fp32,
// with OpenBLAS left at one thread.
#include <cblas.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/backend/cpu/cpu_gemm_parts.h"
#include "cpu_test_util.h"

namespace remat {
namespace {

using cputest::Env;
using cputest::randv;

TEST(CpuGemmSplit, SlicesCoverTheDimensionOnceInWholeUnits) {
  for (std::int64_t n : {1, 63, 64, 65, 200, 768, 3072, 50304})
    for (int lanes : {1, 2, 3, 5, 16}) {
      const cpu::GemmSplit s = cpu::gemm_split(n, 1e9, lanes);
      ASSERT_GE(s.parts, 1);
      ASSERT_LE(s.parts, lanes);
      EXPECT_EQ(s.begin(0), 0);
      EXPECT_EQ(s.begin(s.parts), n);
      for (int p = 0; p < s.parts; ++p) {
        EXPECT_LT(s.begin(p), s.begin(p + 1)) << n << " " << lanes << " part " << p;  // not empty
        if (p > 0) EXPECT_EQ(s.begin(p) % cpu::GemmSplit::kUnit, 0);
      }
    }
  EXPECT_EQ(cpu::gemm_split(4096, 1e3, 4).parts, 1);  // too small to split
}

struct LinearOut {
  std::vector<std::uint8_t> y, dx, dW, db;
};

LinearOut linear_at(int threads, DType dt, std::int64_t M, int K, int N) {
  Env e(threads, 64u << 20);
  Tensor x = e.from(randv(static_cast<std::size_t>(M * K), 1), dt);
  Tensor W = e.from(randv(static_cast<std::size_t>(N) * K, 2, -0.1f, 0.1f), dt);
  Tensor b = e.from(randv(static_cast<std::size_t>(N), 3), dt);
  Tensor y = e.make(dt, M * N);
  Tensor dy = e.from(randv(static_cast<std::size_t>(M * N), 4), dt);
  Tensor dx = e.from(randv(static_cast<std::size_t>(M * K), 5), dt);
  Tensor dW = e.from(randv(static_cast<std::size_t>(N) * K, 6, -0.01f, 0.01f), dt);
  Tensor db = e.make(dt, N);
  e.be.linear_fwd(x, W, &b, y, M, K, N);
  e.be.linear_bwd(x, W, dy, &dx, dW, &db, M, K, N, true);
  EXPECT_EQ(openblas_get_num_threads(), 1);
  return {e.bytes(y), e.bytes(dx), e.bytes(dW), e.bytes(db)};
}

// The largest difference between two outputs read as floats of dtype dt, relative to the
// largest magnitude.
double rel_diff(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b, DType dt) {
  EXPECT_EQ(a.size(), b.size());
  const std::size_t w = dt == DType::BF16 ? 2 : 4, n = std::min(a.size(), b.size()) / w;
  auto at = [&](const std::vector<std::uint8_t>& v, std::size_t i) {
    if (dt == DType::BF16) {
      std::uint16_t h;
      std::memcpy(&h, v.data() + i * 2, 2);
      return static_cast<double>(bf16_to_float(h));
    }
    float f;
    std::memcpy(&f, v.data() + i * 4, 4);
    return static_cast<double>(f);
  };
  double big = 0, diff = 0;
  for (std::size_t i = 0; i < n; ++i) {
    big = std::max(big, std::fabs(at(a, i)));
    diff = std::max(diff, std::fabs(at(a, i) - at(b, i)));
  }
  return big > 0 ? diff / big : diff;
}

TEST(CpuGemmSplit, LinearIsReproducibleAtEachThreadCountAndAgreesAcrossThem) {
  for (DType dt : {DType::BF16, DType::F32}) {
    const std::int64_t M = 96;
    const int K = 200, N = 330;  // neither a multiple of the unit
    const LinearOut one = linear_at(1, dt, M, K, N);
    const double tol = dt == DType::BF16 ? 1e-2 : 1e-5;
    for (int threads : {2, 3}) {
      const LinearOut many = linear_at(threads, dt, M, K, N), again = linear_at(threads, dt, M, K, N);
      EXPECT_EQ(again.y, many.y) << to_string(dt) << " threads " << threads;
      EXPECT_EQ(again.dx, many.dx) << to_string(dt) << " threads " << threads;
      EXPECT_EQ(again.dW, many.dW) << to_string(dt) << " threads " << threads;
      EXPECT_EQ(again.db, many.db) << to_string(dt) << " threads " << threads;
      EXPECT_LT(rel_diff(many.y, one.y, dt), tol) << to_string(dt) << " threads " << threads;
      EXPECT_LT(rel_diff(many.dx, one.dx, dt), tol) << to_string(dt) << " threads " << threads;
      EXPECT_LT(rel_diff(many.dW, one.dW, dt), tol) << to_string(dt) << " threads " << threads;
      EXPECT_EQ(many.db, one.db) << to_string(dt) << " threads " << threads;  // our own column sums
    }
  }
}

TEST(CpuGemmSplit, LinearAgreesWithAPlainLoop) {
  Env e(3, 64u << 20);
  const std::int64_t M = 40;
  const int K = 130, N = 150;
  const auto xv = randv(static_cast<std::size_t>(M * K), 7), Wv = randv(static_cast<std::size_t>(N) * K, 8),
             dyv = randv(static_cast<std::size_t>(M * N), 9);
  Tensor x = e.from(xv), W = e.from(Wv), y = e.make(DType::F32, M * N), dy = e.from(dyv);
  Tensor dx = e.make(DType::F32, M * K), dW = e.make(DType::F32, static_cast<std::int64_t>(N) * K);
  e.be.linear_fwd(x, W, nullptr, y, M, K, N);
  e.be.linear_bwd(x, W, dy, &dx, dW, nullptr, M, K, N, false);
  const auto yv = e.get(y), dxv = e.get(dx), dWv = e.get(dW);
  for (std::int64_t r = 0; r < M; ++r)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += static_cast<double>(xv[r * K + k]) * Wv[n * K + k];
      ASSERT_NEAR(yv[r * N + n], s, 1e-4) << r << " " << n;
    }
  for (std::int64_t r = 0; r < M; ++r)
    for (int k = 0; k < K; ++k) {
      double s = 0;
      for (int n = 0; n < N; ++n) s += static_cast<double>(dyv[r * N + n]) * Wv[n * K + k];
      ASSERT_NEAR(dxv[r * K + k], s, 1e-4) << r << " " << k;
    }
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) {
      double s = 0;
      for (std::int64_t r = 0; r < M; ++r) s += static_cast<double>(dyv[r * N + n]) * xv[r * K + k];
      ASSERT_NEAR(dWv[n * K + k], s, 1e-4) << n << " " << k;
    }
}

std::vector<std::uint8_t> head_at(int threads, DType dt) {
  const std::int64_t rows = 150;  // two chunks of logits rows
  const int H = 72, V = 300;
  Env e(threads, 64u << 20);
  Tensor x = e.from(randv(static_cast<std::size_t>(rows * H), 11), dt);
  Tensor W = e.from(randv(static_cast<std::size_t>(V) * H, 12, -0.2f, 0.2f), dt);
  std::vector<std::int32_t> tg(static_cast<std::size_t>(rows));
  for (std::size_t i = 0; i < tg.size(); ++i) tg[i] = static_cast<std::int32_t>((i * 37) % V);
  Tensor t = e.ints(tg), losses = e.make(DType::F32, rows), dx = e.make(dt, rows * H);
  Tensor dW = e.from(randv(static_cast<std::size_t>(V) * H, 13, -0.01f, 0.01f), dt);
  e.be.head_loss(x, W, t, losses, dx, dW, rows, H, V, 1.0f / static_cast<float>(rows), 0.0f, 1.0f);
  std::vector<std::uint8_t> all = e.bytes(losses);
  for (const Tensor* o : {&dx, &dW}) {
    auto b = e.bytes(*o);
    all.insert(all.end(), b.begin(), b.end());
  }
  return all;
}

TEST(CpuGemmSplit, HeadIsReproducibleAtEachThreadCountAndAgreesAcrossThem) {
  for (DType dt : {DType::BF16, DType::F32}) {
    const auto one = head_at(1, dt);
    for (int threads : {2, 3}) {
      const auto many = head_at(threads, dt);
      EXPECT_EQ(head_at(threads, dt), many) << to_string(dt) << " threads " << threads;
      // Losses (fp32), dx and dW as one byte string: compare the dtype parts apart.
      const std::size_t lb = 150 * 4;
      const std::vector<std::uint8_t> l1(one.begin(), one.begin() + lb), lm(many.begin(), many.begin() + lb);
      const std::vector<std::uint8_t> r1(one.begin() + lb, one.end()), rm(many.begin() + lb, many.end());
      EXPECT_LT(rel_diff(lm, l1, DType::F32), 1e-5) << to_string(dt) << " threads " << threads;
      EXPECT_LT(rel_diff(rm, r1, dt), dt == DType::BF16 ? 1e-2 : 1e-5) << to_string(dt) << " threads " << threads;
    }
  }
}

}  // namespace
}  // namespace remat
