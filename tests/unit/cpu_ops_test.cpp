// CPU backend ops in fp32: forward values against double-precision formulas, backward against
// central finite differences of a random projection of the output.
#include <gtest/gtest.h>

#include <cmath>

#include "core/backend/cpu/cpu_common.h"
#include "tests/unit/cpu_test_util.h"

namespace remat {
namespace {

using cputest::Env;
using cputest::dotd;
using cputest::expect_grad;
using cputest::expect_near_all;
using cputest::randv;

std::vector<float> minus(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> r(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) r[i] = a[i] - b[i];
  return r;
}

TEST(CpuOps, LayerNormForwardAndBackward) {
  Env e;
  const int rows = 5, H = 24;
  const float eps = 1e-5f;
  auto x = randv(rows * H, 1, -2, 2), w = randv(H, 2, 0.5f, 1.5f), b = randv(H, 3);
  auto R = randv(rows * H, 4);
  Tensor tx = e.from(x), tw = e.from(w), tb = e.from(b), ty = e.make(DType::F32, rows * H);
  auto loss = [&] {
    e.set(tx, x), e.set(tw, w), e.set(tb, b);
    e.be.layernorm_fwd(tx, tw, tb, ty, rows, H, eps);
    return dotd(e.get(ty), R);
  };
  loss();
  std::vector<double> want(rows * H);
  for (int r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int c = 0; c < H; ++c) m += x[r * H + c];
    m /= H;
    for (int c = 0; c < H; ++c) v += (x[r * H + c] - m) * (x[r * H + c] - m);
    v /= H;  // biased, as PyTorch
    for (int c = 0; c < H; ++c)
      want[r * H + c] = (x[r * H + c] - m) / std::sqrt(v + eps) * w[c] + b[c];
  }
  expect_near_all("y", e.get(ty), want, 1e-5, 1e-5);

  auto dw0 = randv(H, 5), db0 = randv(H, 6);
  Tensor tdy = e.from(R), tdx = e.from(randv(rows * H, 7)), tdw = e.from(dw0), tdb = e.from(db0);
  e.be.layernorm_bwd(tx, tw, tdy, tdx, tdw, tdb, rows, H, eps, false);
  auto dx = e.get(tdx), dw = minus(e.get(tdw), dw0), db = minus(e.get(tdb), db0);
  expect_grad("dx", x, dx, loss);
  expect_grad("dw", w, dw, loss);
  expect_grad("db", b, db, loss);
  // acc = true adds the same gradient again.
  e.be.layernorm_bwd(tx, tw, tdy, tdx, tdw, tdb, rows, H, eps, true);
  std::vector<float> twice(dx.size());
  for (std::size_t i = 0; i < dx.size(); ++i) twice[i] = 2 * dx[i];
  expect_near_all("dx acc", e.get(tdx), twice, 1e-6, 1e-5);
}

// The weight applied as (off + w): off = 0 for most models, 1 for Gemma's RMSNorm (whose
// weights sit near 0, so the offset dominates).
void rmsnorm_case(float off) {
  SCOPED_TRACE("w_offset " + std::to_string(off));
  Env e;
  const int rows = 6, H = 20;
  const float eps = 1e-6f;
  auto x = randv(rows * H, 11, -2, 2), R = randv(rows * H, 13);
  auto w = off != 0.0f ? randv(H, 12, -0.5f, 0.5f) : randv(H, 12, 0.5f, 1.5f);
  Tensor tx = e.from(x), tw = e.from(w), ty = e.make(DType::F32, rows * H);
  auto loss = [&] {
    e.set(tx, x), e.set(tw, w);
    e.be.rmsnorm_fwd(tx, tw, ty, rows, H, eps, off);
    return dotd(e.get(ty), R);
  };
  loss();
  std::vector<double> want(rows * H);
  for (int r = 0; r < rows; ++r) {
    double ms = 0;
    for (int c = 0; c < H; ++c) ms += static_cast<double>(x[r * H + c]) * x[r * H + c];
    ms /= H;
    for (int c = 0; c < H; ++c)
      want[r * H + c] = x[r * H + c] / std::sqrt(ms + eps) * (static_cast<double>(off) + w[c]);
  }
  expect_near_all("y", e.get(ty), want, 1e-5, 1e-5);
  auto dw0 = randv(H, 14);
  Tensor tdy = e.from(R), tdx = e.from(randv(rows * H, 15)), tdw = e.from(dw0);
  e.be.rmsnorm_bwd(tx, tw, tdy, tdx, tdw, rows, H, eps, false, off);
  auto dx = e.get(tdx), dw = minus(e.get(tdw), dw0);
  expect_grad("dx", x, dx, loss);
  expect_grad("dw", w, dw, loss);
}

TEST(CpuOps, RmsNormForwardAndBackward) { rmsnorm_case(0.0f); }

TEST(CpuOps, RmsNormUnitOffsetForwardAndBackward) { rmsnorm_case(1.0f); }

// The block op takes its offset from OpArgs::w_offset: the same values as the direct call.
TEST(CpuOps, RmsNormOpPassesItsOffset) {
  Env e;
  const int rows = 4, H = 16;
  auto x = randv(rows * H, 16, -2, 2), w = randv(H, 17, -0.5f, 0.5f), dy = randv(rows * H, 18);
  Tensor tx = e.from(x), tw = e.from(w), tdy = e.from(dy);
  Tensor y1 = e.make(DType::F32, rows * H), y2 = e.make(DType::F32, rows * H);
  Tensor dx1 = e.make(DType::F32, rows * H), dx2 = e.make(DType::F32, rows * H);
  Tensor dw1 = e.from(std::vector<float>(H, 0.0f)), dw2 = e.from(std::vector<float>(H, 0.0f));
  e.be.rmsnorm_fwd(tx, tw, y1, rows, H, 1e-6f, 1.0f);
  e.be.rmsnorm_bwd(tx, tw, tdy, dx1, dw1, rows, H, 1e-6f, false, 1.0f);
  OpArgs a;
  a.in[0] = &tx, a.w = &tw, a.out[0] = &y2, a.dout[0] = &tdy, a.din[0] = &dx2, a.dw = &dw2;
  a.M = rows, a.K = H, a.eps = 1e-6f, a.w_offset = 1.0f;
  e.be.run(OpKind::RmsNorm, Pass::Forward, a);
  e.be.run(OpKind::RmsNorm, Pass::Backward, a);
  EXPECT_EQ(e.get(y1), e.get(y2));
  EXPECT_EQ(e.get(dx1), e.get(dx2));
  EXPECT_EQ(e.get(dw1), e.get(dw2));
}

// Rows q (K) | k (N) | v (N): q and k each RMS-normalized with their weight, v copied.
TEST(CpuOps, QkNormForwardAndBackward) {
  Env e;
  const int rows = 5, K = 12, N = 6, W = K + 2 * N;
  const float eps = 1e-6f;
  auto x = randv(rows * W, 91, -2, 2), wq = randv(K, 92, 0.5f, 1.5f), wk = randv(N, 93, 0.5f, 1.5f);
  auto R = randv(rows * W, 94);
  Tensor tx = e.from(x), twq = e.from(wq), twk = e.from(wk), ty = e.make(DType::F32, rows * W);
  auto args = [&] {
    OpArgs a;
    a.in[0] = &tx, a.w = &twq, a.b = &twk, a.M = rows, a.K = K, a.N = N, a.eps = eps;
    return a;
  };
  auto loss = [&] {
    e.set(tx, x), e.set(twq, wq), e.set(twk, wk);
    OpArgs a = args();
    a.out[0] = &ty;
    e.be.run(OpKind::QkNorm, Pass::Forward, a);
    return dotd(e.get(ty), R);
  };
  loss();
  std::vector<double> want(rows * W);
  for (int r = 0; r < rows; ++r) {
    auto norm = [&](int off, int H, const std::vector<float>& w) {
      double ms = 0;
      for (int c = 0; c < H; ++c) ms += static_cast<double>(x[r * W + off + c]) * x[r * W + off + c];
      ms /= H;
      for (int c = 0; c < H; ++c) want[r * W + off + c] = x[r * W + off + c] / std::sqrt(ms + eps) * w[c];
    };
    norm(0, K, wq);
    norm(K, N, wk);
    for (int c = K + N; c < W; ++c) want[r * W + c] = x[r * W + c];
  }
  expect_near_all("y", e.get(ty), want, 1e-5, 1e-5);
  auto y = e.get(ty);
  for (int r = 0; r < rows; ++r)
    for (int c = K + N; c < W; ++c) EXPECT_EQ(y[r * W + c], x[r * W + c]) << "v is copied";
  auto dwq0 = randv(K, 95), dwk0 = randv(N, 96);
  Tensor tdy = e.from(R), tdx = e.from(randv(rows * W, 97)), tdwq = e.from(dwq0), tdwk = e.from(dwk0);
  auto backward = [&](bool acc) {
    OpArgs a = args();
    a.dout[0] = &tdy, a.din[0] = &tdx, a.dw = &tdwq, a.db = &tdwk, a.acc[0] = acc;
    e.be.run(OpKind::QkNorm, Pass::Backward, a);
  };
  backward(false);
  auto dx = e.get(tdx), dwq = minus(e.get(tdwq), dwq0), dwk = minus(e.get(tdwk), dwk0);
  expect_grad("dx", x, dx, loss, 1e-2f, 2e-3, 2e-2, rows * W);
  expect_grad("dwq", wq, dwq, loss);
  expect_grad("dwk", wk, dwk, loss);
  backward(true);  // adds into dx, and the weights' gradients accumulate again
  std::vector<double> twice(dx.size());
  for (std::size_t i = 0; i < dx.size(); ++i) twice[i] = 2.0 * dx[i];
  expect_near_all("dx acc", e.get(tdx), twice, 1e-6, 1e-5);
  auto dwk2 = minus(e.get(tdwk), dwk0);
  for (int c = 0; c < N; ++c) EXPECT_NEAR(dwk2[c], 2 * dwk[c], 1e-5);
  // A q weight shorter than K is refused by name.
  Tensor small = e.make(DType::F32, K - 1);
  OpArgs bad = args();
  bad.out[0] = &ty, bad.w = &small;
  try {
    e.be.run(OpKind::QkNorm, Pass::Forward, bad);
    ADD_FAILURE() << "a short q weight was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("q weight"), std::string::npos) << err.what();
  }
}

TEST(CpuOps, LinearForwardAndBackward) {
  Env e;
  const int M = 7, K = 5, N = 6;
  auto x = randv(M * K, 21), W = randv(N * K, 22), b = randv(N, 23), R = randv(M * N, 24);
  Tensor tx = e.from(x), tW = e.from(W), tb = e.from(b), ty = e.make(DType::F32, M * N);
  auto loss = [&] {
    e.set(tx, x), e.set(tW, W), e.set(tb, b);
    e.be.linear_fwd(tx, tW, &tb, ty, M, K, N);
    return dotd(e.get(ty), R);
  };
  loss();
  std::vector<double> want(M * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = b[n];
      for (int k = 0; k < K; ++k) s += static_cast<double>(x[m * K + k]) * W[n * K + k];
      want[m * N + n] = s;
    }
  expect_near_all("y", e.get(ty), want, 1e-5, 1e-5);

  auto dW0 = randv(N * K, 25), db0 = randv(N, 26);
  Tensor tdy = e.from(R), tdx = e.from(randv(M * K, 27)), tdW = e.from(dW0), tdb = e.from(db0);
  e.be.linear_bwd(tx, tW, tdy, &tdx, tdW, &tdb, M, K, N, false);
  auto dx = e.get(tdx), dW = minus(e.get(tdW), dW0), db = minus(e.get(tdb), db0);
  expect_grad("dx", x, dx, loss);
  expect_grad("dW", W, dW, loss);
  expect_grad("db", b, db, loss);
  // acc = true adds into dx; dW and db always accumulate.
  e.be.linear_bwd(tx, tW, tdy, &tdx, tdW, &tdb, M, K, N, true);
  std::vector<float> twice(dx.size());
  for (std::size_t i = 0; i < dx.size(); ++i) twice[i] = 2 * dx[i];
  expect_near_all("dx acc", e.get(tdx), twice, 1e-6, 1e-5);
  std::vector<float> dW2 = minus(e.get(tdW), dW0);
  for (std::size_t i = 0; i < dW.size(); ++i) EXPECT_NEAR(dW2[i], 2 * dW[i], 1e-5);
  // Without dx, no bias.
  Tensor tdW2 = e.make(DType::F32, N * K);
  e.be.linear_bwd(tx, tW, tdy, nullptr, tdW2, nullptr, M, K, N, false);
  expect_near_all("dW only", e.get(tdW2), dW, 1e-6, 1e-5);
}

TEST(CpuOps, GeluTanhForwardAndBackward) {
  Env e;
  const int n = 64;
  auto x = randv(n, 31, -4, 4), R = randv(n, 32);
  Tensor tx = e.from(x), ty = e.make(DType::F32, n);
  auto loss = [&] {
    e.set(tx, x);
    e.be.gelu_fwd(tx, ty, n);
    return dotd(e.get(ty), R);
  };
  loss();
  std::vector<double> want(n);
  for (int i = 0; i < n; ++i) {
    double v = x[i];
    want[i] = 0.5 * v * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
  }
  expect_near_all("y", e.get(ty), want, 1e-6, 1e-5);
  Tensor tdy = e.from(R), tdx = e.from(randv(n, 33));
  e.be.gelu_bwd(tx, tdy, tdx, n, false);
  auto dx = e.get(tdx);
  expect_grad("dx", x, dx, loss, 1e-2f, 1e-3, 1e-2, n);
}

TEST(CpuOps, SwiGluForwardAndBackward) {
  Env e;
  const int rows = 4, F = 8;
  auto gu = randv(rows * 2 * F, 41, -3, 3), R = randv(rows * F, 42);
  Tensor tgu = e.from(gu), ty = e.make(DType::F32, rows * F);
  auto loss = [&] {
    e.set(tgu, gu);
    e.be.swiglu_fwd(tgu, ty, rows, F);
    return dotd(e.get(ty), R);
  };
  loss();
  std::vector<double> want(rows * F);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < F; ++c) {
      double g = gu[r * 2 * F + c], u = gu[r * 2 * F + F + c];
      want[r * F + c] = g / (1 + std::exp(-g)) * u;
    }
  expect_near_all("y", e.get(ty), want, 1e-6, 1e-5);
  Tensor tdy = e.from(R), tdgu = e.from(randv(rows * 2 * F, 43));
  e.be.swiglu_bwd(tgu, tdy, tdgu, rows, F, false);
  auto dgu = e.get(tdgu);
  expect_grad("dgu", gu, dgu, loss, 1e-2f, 1e-3, 1e-2, 64);
}

// Runs the op's backward with acc = false, then with acc = true into the same buffer, and
// checks the second adds the first result again; returns the first.
std::vector<float> backward_and_acc(Env& e, OpKind op, const Tensor& x, const Tensor& dy,
                                    const Tensor& dx, std::int64_t M, int K) {
  e.be.run(op, Pass::Backward, cputest::act_bwd_args(x, dy, dx, M, K, false));
  auto once = e.get(dx);
  e.be.run(op, Pass::Backward, cputest::act_bwd_args(x, dy, dx, M, K, true));
  std::vector<double> twice(once.size());
  for (std::size_t i = 0; i < once.size(); ++i) twice[i] = 2.0 * once[i];
  expect_near_all("dx acc", e.get(dx), twice, 1e-6, 1e-5);
  return once;
}

double gelu_tanh_ref(double v) {
  return 0.5 * v * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
}

TEST(CpuOps, GeGluForwardAndBackward) {
  Env e;
  const int rows = 5, F = 12;
  auto gu = randv(rows * 2 * F, 44, -4, 4), R = randv(rows * F, 45);
  Tensor tgu = e.from(gu), ty = e.make(DType::F32, rows * F);
  auto loss = [&] {
    e.set(tgu, gu);
    e.be.run(OpKind::GeGlu, Pass::Forward, cputest::act_args(tgu, ty, rows, F));
    return dotd(e.get(ty), R);
  };
  loss();
  std::vector<double> want(rows * F);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < F; ++c)
      want[r * F + c] = gelu_tanh_ref(gu[r * 2 * F + c]) * gu[r * 2 * F + F + c];
  expect_near_all("y", e.get(ty), want, 1e-6, 1e-5);
  Tensor tdy = e.from(R), tdgu = e.from(randv(rows * 2 * F, 46));
  auto dgu = backward_and_acc(e, OpKind::GeGlu, tgu, tdy, tdgu, rows, F);
  expect_grad("dgu", gu, dgu, loss, 1e-2f, 1e-3, 1e-2, 2 * rows * F);
  // A gate_up tensor shorter than [M, 2K] is refused by name.
  Tensor small = e.make(DType::F32, rows * F);
  try {
    e.be.run(OpKind::GeGlu, Pass::Forward, cputest::act_args(small, ty, rows, F));
    ADD_FAILURE() << "a short gate_up was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("gate_up"), std::string::npos) << err.what();
  }
}

TEST(CpuOps, GeluErfForwardAndBackward) {
  Env e;
  const int n = 300;
  auto x = randv(n, 34, -5, 5), R = randv(n, 35);
  Tensor tx = e.from(x), ty = e.make(DType::F32, n);
  auto loss = [&] {
    e.set(tx, x);
    e.be.run(OpKind::GeluErf, Pass::Forward, cputest::act_args(tx, ty, n));
    return dotd(e.get(ty), R);
  };
  loss();
  std::vector<double> want(n), tanh_form(n);
  for (int i = 0; i < n; ++i) {
    want[i] = 0.5 * x[i] * (1 + std::erf(x[i] / std::sqrt(2.0)));
    tanh_form[i] = gelu_tanh_ref(x[i]);
  }
  expect_near_all("y", e.get(ty), want, 1e-6, 1e-5);
  // The two forms differ by more than the tolerance somewhere: this is not the tanh form.
  auto y = e.get(ty);
  double gap = 0;
  for (int i = 0; i < n; ++i) gap = std::max(gap, std::fabs(y[i] - tanh_form[i]));
  EXPECT_GT(gap, 1e-4);
  Tensor tdy = e.from(R), tdx = e.from(randv(n, 36));
  auto dx = backward_and_acc(e, OpKind::GeluErf, tx, tdy, tdx, n, 1);
  expect_grad("dx", x, dx, loss, 1e-2f, 1e-3, 1e-2, 64);
}

TEST(CpuOps, RopeRotateHalfForwardAndBackward) {
  Env e;
  AttnDims a;
  a.B = 2, a.S = 5, a.heads = 4, a.kv_heads = 2, a.d = 8;
  const int width = (a.heads + 2 * a.kv_heads) * a.d, n = a.B * a.S * width;
  const float theta = 100.0f;
  RopeFrequencies freqs;
  const RopeTable rope = cputest::default_rope(freqs, a.d, theta);
  auto x = randv(n, 51), R = randv(n, 52);
  Tensor tx = e.from(x), ty = e.make(DType::F32, n);
  auto loss = [&] {
    e.set(tx, x);
    e.be.rope_fwd(tx, ty, a, rope);
    return dotd(e.get(ty), R);
  };
  loss();
  // Hugging Face: q * cos + rotate_half(q) * sin with cos/sin = cat(freqs, freqs).
  std::vector<double> want(n);
  const int half = a.d / 2;
  for (int b = 0; b < a.B; ++b)
    for (int s = 0; s < a.S; ++s)
      for (int h = 0; h < a.heads + 2 * a.kv_heads; ++h) {
        const int base = (b * a.S + s) * width + h * a.d;
        for (int i = 0; i < a.d; ++i) {
          if (h >= a.heads + a.kv_heads) {
            want[base + i] = x[base + i];
            continue;
          }
          const int fi = i % half;
          const double ang = s * std::pow(static_cast<double>(theta), -2.0 * fi / a.d);
          const double rot = i < half ? -x[base + i + half] : x[base + i - half];
          want[base + i] = x[base + i] * std::cos(ang) + rot * std::sin(ang);
        }
      }
  expect_near_all("y", e.get(ty), want, 1e-5, 1e-5);
  Tensor tdy = e.from(R), tdx = e.from(randv(n, 53));
  e.be.rope_bwd(tdy, tdx, a, rope, false);
  auto dx = e.get(tdx);
  expect_grad("dx", x, dx, loss, 1e-2f, 1e-4, 1e-3, 48);
}

TEST(CpuOps, ResidualAndDropoutWithMask) {
  Env e;
  const int n = 300;
  const float p = 0.3f;
  DropoutKey key{99, 3, 1, kSiteAttentionResidual};
  Tensor mask = e.make(DType::U8, n);
  e.be.dropout_mask(mask, key, p, n);
  auto res = randv(n, 61), x = randv(n, 62), R = randv(n, 63);
  Tensor tres = e.from(res), tx = e.from(x), tout = e.make(DType::F32, n);
  auto loss = [&] {
    e.set(tres, res), e.set(tx, x);
    e.be.residual_fwd(tres, tx, &mask, tout, p, n);
    return dotd(e.get(tout), R);
  };
  loss();
  auto m = e.get(mask);
  std::vector<double> want(n);
  for (int i = 0; i < n; ++i) want[i] = res[i] + (m[i] != 0 ? x[i] / (1.0 - p) : 0.0);
  expect_near_all("out", e.get(tout), want, 1e-6, 1e-6);
  Tensor tdout = e.from(R), tdres = e.make(DType::F32, n), tdx = e.from(randv(n, 64));
  e.be.residual_bwd(tdout, &mask, tdres, tdx, p, n, false, false);
  auto dres = e.get(tdres), dx = e.get(tdx);
  expect_grad("dres", res, dres, loss, 1e-2f, 1e-4, 1e-3, 40);
  expect_grad("dx", x, dx, loss, 1e-2f, 1e-4, 1e-3, 40);
  // dropout_fwd/bwd alone: the same mask and scale.
  Tensor ty = e.make(DType::F32, n), tdx2 = e.make(DType::F32, n);
  e.be.dropout_fwd(tx, mask, ty, p, n);
  e.be.dropout_bwd(tdout, mask, tdx2, p, n, false);
  auto y = e.get(ty), dx2 = e.get(tdx2);
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(y[i], m[i] != 0 ? x[i] / (1.0 - p) : 0.0, 1e-6);
    EXPECT_EQ(dx2[i], dx[i]);
  }
  // p == 0 without a mask: out = res + x.
  e.be.residual_fwd(tres, tx, nullptr, tout, 0.0f, n);
  auto o = e.get(tout);
  for (int i = 0; i < n; ++i) EXPECT_EQ(o[i], res[i] + x[i]);
  // The branch's multiplier (Granite's residual_multiplier) through the op's arguments, with the
  // mask and without: out = res + x * mask / (1 - p) * mult; the branch's gradient times mult.
  const float mult = 0.22f;
  for (const Tensor* mk : std::initializer_list<const Tensor*>{&mask, nullptr}) {
    const float pm = mk ? p : 0.0f;
    OpArgs a;
    a.in[0] = &tres, a.in[1] = &tx, a.in[2] = mk, a.out[0] = &tout, a.M = n, a.p = pm, a.branch_mult = mult;
    a.dout[0] = &tdout, a.din[0] = &tdres, a.din[1] = &tdx;
    e.be.run(OpKind::Residual, Pass::Forward, a);
    e.be.run(OpKind::Residual, Pass::Backward, a);
    auto out = e.get(tout), dxm = e.get(tdx), drm = e.get(tdres);
    for (int i = 0; i < n; ++i) {
      const double keep = mk ? (m[i] != 0 ? 1.0 / (1.0 - p) : 0.0) : 1.0;
      EXPECT_NEAR(out[i], res[i] + x[i] * keep * mult, 1e-6) << i;
      EXPECT_NEAR(dxm[i], R[i] * keep * mult, 1e-6) << i;
      EXPECT_EQ(drm[i], R[i]) << i;
    }
  }
}

// softcap > 0: the logits are softcap * tanh(raw / softcap) (Gemma 2's final soft-capping);
// mult: the raw logits' multiplier (Granite's 1 / logits_scaling), before the cap.
void head_loss_case(float softcap, float mult = 1.0f) {
  SCOPED_TRACE("softcap " + std::to_string(softcap) + " mult " + std::to_string(mult));
  Env e;
  const int rows = 130, H = 8, V = 12;  // two chunks of rows
  const float scale = 0.5f;
  auto x = randv(rows * H, 71), W = randv(V * H, 72);
  std::vector<std::int32_t> tg(rows);
  for (int r = 0; r < rows; ++r) tg[r] = (r * 7 + 3) % V;
  Tensor tx = e.from(x), tW = e.from(W), tt = e.ints(tg), tl = e.make(DType::F32, rows);
  Tensor tdx = e.from(randv(rows * H, 73)), tdW = e.make(DType::F32, V * H);
  auto dW0 = randv(V * H, 74);
  auto loss = [&] {
    e.set(tx, x), e.set(tW, W), e.set(tdW, dW0);
    e.be.head_loss(tx, tW, tt, tl, tdx, tdW, rows, H, V, scale, softcap, mult);
    double s = 0;
    for (float l : e.get(tl)) s += l;
    return s * scale;
  };
  loss();
  std::vector<double> want(rows);
  for (int r = 0; r < rows; ++r) {
    std::vector<double> z(V);
    double mx = -1e300, se = 0;
    for (int v = 0; v < V; ++v) {
      z[v] = 0;
      for (int h = 0; h < H; ++h) z[v] += static_cast<double>(x[r * H + h]) * W[v * H + h];
      z[v] *= mult;
      if (softcap > 0) z[v] = softcap * std::tanh(z[v] / softcap);
      mx = std::max(mx, z[v]);
    }
    for (int v = 0; v < V; ++v) se += std::exp(z[v] - mx);
    want[r] = mx + std::log(se) - z[tg[r]];
  }
  expect_near_all("losses", e.get(tl), want, 1e-5, 1e-5);
  auto dx = e.get(tdx), dW = minus(e.get(tdW), dW0);
  expect_grad("dx", x, dx, loss, 1e-2f, 1e-3, 1e-2, 32);
  expect_grad("dW", W, dW, loss, 1e-2f, 1e-3, 1e-2, 32);
  // Targets outside the vocabulary are refused.
  Tensor bad = e.ints(std::vector<std::int32_t>(rows, V));
  EXPECT_THROW(e.be.head_loss(tx, tW, bad, tl, tdx, tdW, rows, H, V, scale, softcap, 1.0f), Error);
  EXPECT_THROW(e.be.head_loss(tx, tW, tt, tl, tdx, tdW, rows, H, V, scale, -1.0f, 1.0f), Error);
  EXPECT_THROW(e.be.head_loss(tx, tW, tt, tl, tdx, tdW, rows, H, V, scale, softcap, 0.0f), Error);
}

TEST(CpuOps, HeadLossAcrossChunks) { head_loss_case(0.0f); }
// A cap of 0.8 on logits of about +-2: tanh saturates, so an uncapped loss would not match.
TEST(CpuOps, HeadLossSoftCappedAcrossChunks) { head_loss_case(0.8f); }
// Granite's logits_scaling 16 as its multiplier 1/16, with and without a cap after it.
TEST(CpuOps, HeadLossScaledLogits) {
  head_loss_case(0.0f, 1.0f / 16.0f);
  head_loss_case(0.8f, 3.0f);
}

// out = wte[token] * scale + wpe[position]; dwte += scale * dout (scale 1, or Gemma's sqrt(H)).
void embedding_case(float scale) {
  SCOPED_TRACE("scale " + std::to_string(scale));
  Env e;
  const int B = 2, S = 6, H = 4, V = 5, P = 8;
  std::vector<std::int32_t> tok = {0, 3, 3, 1, 4, 3, 2, 3, 0, 0, 1, 4};
  auto wte = randv(V * H, 81), wpe = randv(P * H, 82), dout = randv(B * S * H, 83);
  Tensor tt = e.ints(tok), twte = e.from(wte), twpe = e.from(wpe),
         out = e.make(DType::F32, B * S * H);
  e.be.embedding_fwd(tt, twte, &twpe, out, B, S, H, scale);
  auto o = e.get(out);
  for (int r = 0; r < B * S; ++r)
    for (int c = 0; c < H; ++c)
      EXPECT_EQ(o[r * H + c], wte[tok[r] * H + c] * scale + wpe[(r % S) * H + c]);
  auto dwte0 = randv(V * H, 84), dwpe0 = randv(P * H, 85);
  Tensor td = e.from(dout), tdwte = e.from(dwte0), tdwpe = e.from(dwpe0);
  e.be.embedding_bwd(tt, td, tdwte, &tdwpe, B, S, H, scale);
  std::vector<double> wt(dwte0.begin(), dwte0.end()), wp(dwpe0.begin(), dwpe0.end());
  for (int r = 0; r < B * S; ++r)
    for (int c = 0; c < H; ++c) {
      wt[tok[r] * H + c] += static_cast<double>(scale) * dout[r * H + c];
      wp[(r % S) * H + c] += dout[r * H + c];
    }
  expect_near_all("dwte", e.get(tdwte), wt, 1e-6, 1e-6);
  expect_near_all("dwpe", e.get(tdwpe), wp, 1e-6, 1e-6);
  Tensor bad = e.ints(std::vector<std::int32_t>(B * S, V));
  EXPECT_THROW(e.be.embedding_fwd(bad, twte, &twpe, out, B, S, H, scale), Error);
}

TEST(CpuOps, EmbeddingForwardAndScatterAdd) { embedding_case(1.0f); }

TEST(CpuOps, EmbeddingScaledForwardAndScatterAdd) { embedding_case(std::sqrt(4.0f)); }

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// The soft-caps' SIMD tanh: every length (whole vectors and each tail), within 2 ulps of the
// double-precision tanh of the float quotient, and the quotient is x / cap (not x * (1 / cap)).
TEST(CpuOps, TanhOfQuotientIsTanhToTwoUlpsAtEveryLength) {
  for (float cap : {0.7f, 3.0f, 50.0f})
    for (int n = 0; n <= 11; ++n) {
      std::vector<float> x(n + 1);
      for (int k = 0; k <= n; ++k) x[k] = (k - 5) * 0.913f * cap / 4 + 1e-3f * k;
      const std::vector<float> in = x;
      cpu::tanh_of_quotient(x.data(), n, cap);
      for (int k = 0; k < n; ++k) {
        const float want = static_cast<float>(std::tanh(static_cast<double>(in[k] / cap)));
        EXPECT_LE(std::fabs(x[k] - want), 2 * std::fabs(std::nextafter(want, 2.0f) - want) + 1e-30f)
            << "n " << n << " k " << k << " cap " << cap;
      }
      EXPECT_EQ(x[n], in[n]) << "the value past n is left alone";
    }
}

}  // namespace
}  // namespace remat
