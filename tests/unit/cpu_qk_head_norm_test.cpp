// Per-head QK-norm (Qwen3) on the CPU in fp32: each d-wide head of the q part and of the k part
// of a qkv row RMS-normalized with one d-wide weight (q's, k's), v copied; values against double
// precision, gradients against central finite differences of a random projection.
#include <gtest/gtest.h>

#include <cmath>

#include "core/backend/cpu/cpu_common.h"
#include "tests/unit/cpu_test_util.h"

namespace remat {
namespace {

std::vector<float> grad_since(const std::vector<float>& now, const std::vector<float>& start) {
  std::vector<float> r(now.size());
  for (std::size_t i = 0; i < now.size(); ++i) r[i] = now[i] - start[i];
  return r;
}

TEST(CpuQkHeadNorm, EachHeadNormalizedWithTheSharedWeight) {
  cputest::Env e;
  const int rows = 3, d = 4, heads = 3, kv = 2, K = heads * d, N = kv * d, W = K + 2 * N;
  const float eps = 1e-6f;
  auto x = cputest::randv(rows * W, 191, -2, 2), wq = cputest::randv(d, 192, 0.5f, 1.5f),
       wk = cputest::randv(d, 193, 0.5f, 1.5f), R = cputest::randv(rows * W, 194);
  Tensor tx = e.from(x), twq = e.from(wq), twk = e.from(wk), ty = e.make(DType::F32, rows * W);
  auto args = [&] {
    OpArgs a;
    a.in[0] = &tx, a.w = &twq, a.b = &twk, a.M = rows, a.K = K, a.N = N, a.eps = eps;
    a.attn.d = d;
    return a;
  };
  auto loss = [&] {
    e.set(tx, x), e.set(twq, wq), e.set(twk, wk);
    OpArgs a = args();
    a.out[0] = &ty;
    e.be.run(OpKind::QkHeadNorm, Pass::Forward, a);
    return cputest::dotd(e.get(ty), R);
  };
  loss();
  std::vector<double> want(rows * W);
  for (int r = 0; r < rows; ++r) {
    for (int h = 0; h < heads + kv; ++h) {
      const int off = h * d;
      const std::vector<float>& w = h < heads ? wq : wk;
      double ms = 0;
      for (int c = 0; c < d; ++c) ms += static_cast<double>(x[r * W + off + c]) * x[r * W + off + c];
      ms /= d;
      for (int c = 0; c < d; ++c) want[r * W + off + c] = x[r * W + off + c] / std::sqrt(ms + eps) * w[c];
    }
    for (int c = K + N; c < W; ++c) want[r * W + c] = x[r * W + c];
  }
  cputest::expect_near_all("y", e.get(ty), want, 1e-5, 1e-5);
  auto dwq0 = cputest::randv(d, 195), dwk0 = cputest::randv(d, 196);
  Tensor tdy = e.from(R), tdx = e.from(cputest::randv(rows * W, 197)), tdwq = e.from(dwq0), tdwk = e.from(dwk0);
  auto backward = [&](bool acc) {
    OpArgs a = args();
    a.dout[0] = &tdy, a.din[0] = &tdx, a.dw = &tdwq, a.db = &tdwk, a.acc[0] = acc;
    e.be.run(OpKind::QkHeadNorm, Pass::Backward, a);
  };
  backward(false);
  auto dx = e.get(tdx), dwq = grad_since(e.get(tdwq), dwq0), dwk = grad_since(e.get(tdwk), dwk0);
  cputest::expect_grad("dx", x, dx, loss, 1e-2f, 2e-3, 2e-2, rows * W);
  cputest::expect_grad("dwq", wq, dwq, loss);  // summed over the q heads of every row
  cputest::expect_grad("dwk", wk, dwk, loss);
  backward(true);
  std::vector<double> twice(dx.size());
  for (std::size_t i = 0; i < dx.size(); ++i) twice[i] = 2.0 * dx[i];
  cputest::expect_near_all("dx acc", e.get(tdx), twice, 1e-6, 1e-5);
  // The projection-wide op over the same row differs: the statistic spans one head here.
  Tensor ty2 = e.make(DType::F32, rows * W);
  Tensor wide_q = e.from(std::vector<float>(K, 1.0f)), wide_k = e.from(std::vector<float>(N, 1.0f));
  OpArgs wide = args();
  wide.w = &wide_q, wide.b = &wide_k, wide.out[0] = &ty2;
  e.be.run(OpKind::QkNorm, Pass::Forward, wide);
  EXPECT_NE(e.get(ty2), e.get(ty));
  // Gemma 3's weights apply as (1 + w): an offset of 1 with w is a plain norm with 1 + w.
  Tensor ty3 = e.make(DType::F32, rows * W), ty4 = e.make(DType::F32, rows * W);
  std::vector<float> wq1(wq), wk1(wk);
  for (auto* v : {&wq1, &wk1})
    for (float& x1 : *v) x1 += 1.0f;
  Tensor twq1 = e.from(wq1), twk1 = e.from(wk1);
  OpArgs off = args();
  off.out[0] = &ty3, off.w_offset = 1.0f;
  e.be.run(OpKind::QkHeadNorm, Pass::Forward, off);
  OpArgs plain = args();
  plain.out[0] = &ty4, plain.w = &twq1, plain.b = &twk1;
  e.be.run(OpKind::QkHeadNorm, Pass::Forward, plain);
  EXPECT_EQ(e.get(ty3), e.get(ty4));
  // q and k widths that are not whole heads are refused, naming the widths.
  OpArgs bad = args();
  bad.out[0] = &ty, bad.attn.d = 5;
  try {
    e.be.run(OpKind::QkHeadNorm, Pass::Forward, bad);
    ADD_FAILURE() << "widths that are not whole heads were accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("not whole heads of 5"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace remat
