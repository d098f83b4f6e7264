// The mixture-of-experts ops on CUDA against their CPU twins through Backend::run: the layer's
// forward (route, permute, the experts' GEMMs, unpermute) and backward, dropless and with a
// capacity that drops choices, on the same bytes; the routing tables equal, the values within
// the usual relative L2 error (gpu_test_util.h). Skips without a GPU.
#include <gtest/gtest.h>

#include <cstring>

#include "core/backend/moe_aux.h"
#include "tests/gpu/gpu_test_util.h"

namespace remat::gputest {
namespace {

class GpuMoe : public ::testing::TestWithParam<DType> {};

TEST_P(GpuMoe, LayerForwardAndBackwardMatchTheCpu) {
  REMAT_REQUIRE_GPU();
  const DType dt = GetParam();
  for (std::int64_t capacity : {0, 20}) {
    SCOPED_TRACE(capacity);
    Dual d;
    MoeDims m;
    m.experts = 8, m.top_k = 2, m.tokens = 96, m.capacity = capacity, m.norm_topk = true;
    const int H = 64, F = 48;
    const std::int64_t T = m.tokens, R = m.rows(), n = T * m.top_k, routing_n = 2 * n + 2 * m.experts;
    Both x = d.random(dt, T * H, -1, 1, 1), logits = d.random(dt, T * m.experts, -2, 2, 2);
    Both w1 = d.random(dt, m.experts * 2 * F * H, -0.2f, 0.2f, 3), w2 = d.random(dt, m.experts * H * F, -0.2f, 0.2f, 4);
    Both w = d.poisoned(dt, n), routing = d.alloc(DType::I32, routing_n), xp = d.alloc(dt, R * H),
         gu = d.alloc(dt, R * 2 * F), act = d.alloc(dt, R * F), yp = d.alloc(dt, R * H), y = d.poisoned(dt, T * H),
         shared = d.random(dt, T * H, -1, 1, 9);
    auto on_both = [&](auto&& f) {
      f(static_cast<Backend&>(d.cpu), true);
      f(static_cast<Backend&>(*d.gpu), false);
    };
#define T_(b, is_cpu) ((is_cpu) ? (b).c : (b).g)
    on_both([&](Backend& be, bool c) {
      OpArgs a;
      a.moe = m;
      a.in[0] = &T_(logits, c), a.out[0] = &T_(w, c), a.out[1] = &T_(routing, c), a.M = T, a.K = m.top_k, a.N = m.experts;
      be.run(OpKind::MoeRoute, Pass::Forward, a);
      a = OpArgs{};
      a.moe = m, a.in[0] = &T_(x, c), a.in[1] = &T_(routing, c), a.out[0] = &T_(xp, c), a.K = H;
      be.run(OpKind::MoePermute, Pass::Forward, a);
      a = OpArgs{};
      a.moe = m, a.in[0] = &T_(xp, c), a.in[1] = &T_(routing, c), a.out[0] = &T_(gu, c), a.w = &T_(w1, c);
      a.M = R, a.K = H, a.N = 2 * F;
      be.run(OpKind::ExpertLinear, Pass::Forward, a);
      a = OpArgs{};
      a.in[0] = &T_(gu, c), a.out[0] = &T_(act, c), a.M = R, a.K = F;
      be.run(OpKind::SwiGlu, Pass::Forward, a);
      a = OpArgs{};
      a.moe = m, a.in[0] = &T_(act, c), a.in[1] = &T_(routing, c), a.out[0] = &T_(yp, c), a.w = &T_(w2, c);
      a.M = R, a.K = F, a.N = H;
      be.run(OpKind::ExpertLinear, Pass::Forward, a);
      a = OpArgs{};
      a.moe = m, a.in[0] = &T_(yp, c), a.in[1] = &T_(w, c), a.in[2] = &T_(routing, c), a.in[3] = &T_(shared, c);
      a.out[0] = &T_(y, c), a.K = H;
      be.run(OpKind::MoeUnpermute, Pass::Forward, a);
    });
    d.gpu->synchronize();
    std::vector<std::uint8_t> rc(static_cast<std::size_t>(routing_n) * 4);
    std::memcpy(rc.data(), routing.c.data, rc.size());
    EXPECT_EQ(d.gpu_bytes(routing.g), rc) << "routing tables differ";
    EXPECT_LE(d.rel(w), tol(dt));
    EXPECT_LE(d.rel(y), tol(dt));
    // Backward: unpermute, fc2, activation, fc, permute, route.
    Both dy = d.random(dt, T * H, -1, 1, 5), dyp = d.poisoned(dt, R * H), dw = d.poisoned(dt, n),
         dact = d.poisoned(dt, R * F), dgu = d.poisoned(dt, R * 2 * F), dxp = d.poisoned(dt, R * H),
         dx = d.poisoned(dt, T * H), dl = d.poisoned(dt, T * m.experts), dw1 = d.alloc(dt, m.experts * 2 * F * H),
         dw2 = d.alloc(dt, m.experts * H * F), dshared = d.poisoned(dt, T * H);
    on_both([&](Backend& be, bool c) {
      OpArgs a;
      a.moe = m, a.in[0] = &T_(yp, c), a.in[1] = &T_(w, c), a.in[2] = &T_(routing, c), a.dout[0] = &T_(dy, c);
      a.in[3] = &T_(shared, c), a.din[0] = &T_(dyp, c), a.din[1] = &T_(dw, c), a.din[3] = &T_(dshared, c), a.K = H;
      be.run(OpKind::MoeUnpermute, Pass::Backward, a);
      a = OpArgs{};
      a.moe = m, a.in[0] = &T_(act, c), a.in[1] = &T_(routing, c), a.w = &T_(w2, c), a.dw = &T_(dw2, c);
      a.dout[0] = &T_(dyp, c), a.din[0] = &T_(dact, c), a.M = R, a.K = F, a.N = H;
      be.run(OpKind::ExpertLinear, Pass::Backward, a);
      a = OpArgs{};
      a.in[0] = &T_(gu, c), a.dout[0] = &T_(dact, c), a.din[0] = &T_(dgu, c), a.M = R, a.K = F;
      be.run(OpKind::SwiGlu, Pass::Backward, a);
      a = OpArgs{};
      a.moe = m, a.in[0] = &T_(xp, c), a.in[1] = &T_(routing, c), a.w = &T_(w1, c), a.dw = &T_(dw1, c);
      a.dout[0] = &T_(dgu, c), a.din[0] = &T_(dxp, c), a.M = R, a.K = H, a.N = 2 * F;
      be.run(OpKind::ExpertLinear, Pass::Backward, a);
      a = OpArgs{};
      a.moe = m, a.in[0] = &T_(x, c), a.in[1] = &T_(routing, c), a.dout[0] = &T_(dxp, c), a.din[0] = &T_(dx, c), a.K = H;
      be.run(OpKind::MoePermute, Pass::Backward, a);
      a = OpArgs{};
      a.moe = m, a.in[0] = &T_(logits, c), a.out[0] = &T_(w, c), a.out[1] = &T_(routing, c), a.dout[0] = &T_(dw, c);
      a.din[0] = &T_(dl, c), a.M = T, a.K = m.top_k, a.N = m.experts;
      be.run(OpKind::MoeRoute, Pass::Backward, a);
    });
#undef T_
    d.gpu->synchronize();
    for (auto [name, b] : {std::pair{"dyp", &dyp}, {"dshared", &dshared}, {"dweights", &dw}, {"dW2", &dw2}, {"dW1", &dw1}, {"dx", &dx},
                           {"dlogits", &dl}})
      EXPECT_LE(d.rel(*b), tol(dt)) << name;
  }
}

// DeepSeek-V3's router (sigmoid, a random selection bias, 4 groups of which 2, scaled weights):
// the same choices and weights as the CPU, and the same logits' gradient.
TEST_P(GpuMoe, SigmoidGroupLimitedRouterMatchesTheCpu) {
  REMAT_REQUIRE_GPU();
  const DType dt = GetParam();
  Dual d;
  MoeDims m;
  m.experts = 16, m.top_k = 4, m.tokens = 200, m.norm_topk = true, m.sigmoid = true, m.groups = 4, m.topk_groups = 2;
  m.scaling = 2.5f;
  const std::int64_t T = m.tokens, n = T * m.top_k, routing_n = 2 * n + 2 * m.experts;
  Both logits = d.random(dt, T * m.experts, -3, 3, 21), bias = d.random(dt, m.experts, -0.3f, 0.3f, 22);
  Both w = d.poisoned(dt, n), routing = d.alloc(DType::I32, routing_n), dw = d.random(dt, n, -1, 1, 23),
       dl = d.poisoned(dt, T * m.experts);
  for (bool c : {true, false}) {
    Backend& be = c ? static_cast<Backend&>(d.cpu) : static_cast<Backend&>(*d.gpu);
    OpArgs a;
    a.moe = m, a.in[0] = c ? &logits.c : &logits.g, a.b = c ? &bias.c : &bias.g, a.out[0] = c ? &w.c : &w.g;
    a.out[1] = c ? &routing.c : &routing.g, a.M = T, a.K = m.top_k, a.N = m.experts;
    be.run(OpKind::MoeRoute, Pass::Forward, a);
    a.dout[0] = c ? &dw.c : &dw.g, a.din[0] = c ? &dl.c : &dl.g;
    be.run(OpKind::MoeRoute, Pass::Backward, a);
  }
  d.gpu->synchronize();
  std::vector<std::uint8_t> rc(static_cast<std::size_t>(routing_n) * 4);
  std::memcpy(rc.data(), routing.c.data, rc.size());
  EXPECT_EQ(d.gpu_bytes(routing.g), rc) << "routing tables differ";
  EXPECT_LE(d.rel(w), tol(dt));
  EXPECT_LE(d.rel(dl), tol(dt));
}

// The load-balancing loss (core/backend/moe_aux.h): two layers' statistics from the router's
// forward, the loss and its gradient, and the router's backward through it, as the CPU's; the
// same bits on a second pass.
TEST_P(GpuMoe, LoadBalancingLossMatchesTheCpu) {
  REMAT_REQUIRE_GPU();
  const DType dt = GetParam();
  Dual d;
  MoeDims m;
  m.experts = 8, m.top_k = 2, m.tokens = 300, m.norm_topk = true;
  const MoeAuxLayout L{2, m.experts};
  const std::int64_t T = m.tokens, n = T * m.top_k, routing_n = 2 * n + 2 * m.experts;
  Both l0 = d.random(dt, T * m.experts, -3, 3, 31), l1 = d.random(dt, T * m.experts, -3, 3, 32);
  Both w = d.poisoned(dt, n), routing = d.alloc(DType::I32, routing_n), dw = d.random(dt, n, -1, 1, 33),
       dl = d.poisoned(dt, T * m.experts), aux = d.alloc(DType::F32, L.size());
  std::vector<float> first;
  for (int pass = 0; pass < 2; ++pass)
    for (bool c : {true, false}) {
      Backend& be = c ? static_cast<Backend&>(d.cpu) : static_cast<Backend&>(*d.gpu);
      Tensor& buf = c ? aux.c : aux.g;
      for (int l = 0; l < 2; ++l) {
        Both& logits = l == 0 ? l0 : l1;
        const Tensor stats = buf.slice(L.stats(l), 2 * m.experts);
        OpArgs a;
        a.moe = m, a.in[0] = c ? &logits.c : &logits.g, a.out[0] = c ? &w.c : &w.g;
        a.out[1] = c ? &routing.c : &routing.g, a.aux = &stats, a.M = T, a.K = m.top_k, a.N = m.experts;
        be.run(OpKind::MoeRoute, Pass::Forward, a);
      }
      be.moe_aux_loss(buf, 2, m.experts, T, 0.02, 0.5);
      const Tensor g = buf.slice(L.grad(), m.experts);
      OpArgs a;
      a.moe = m, a.in[0] = c ? &l1.c : &l1.g, a.out[0] = c ? &w.c : &w.g, a.out[1] = c ? &routing.c : &routing.g;
      a.dout[0] = c ? &dw.c : &dw.g, a.din[0] = c ? &dl.c : &dl.g, a.aux = &g, a.M = T, a.K = m.top_k, a.N = m.experts;
      be.run(OpKind::MoeRoute, Pass::Backward, a);
      if (!c && pass == 0) first = d.gpu_read(aux);
    }
  d.gpu->synchronize();
  const std::vector<float> ac = d.cpu_read(aux), ag = d.gpu_read(aux);
  for (int l = 0; l < 2; ++l)  // the choices per expert: equal
    for (int x = 0; x < m.experts; ++x)
      EXPECT_EQ(ag[static_cast<std::size_t>(L.stats(l) + x)], ac[static_cast<std::size_t>(L.stats(l) + x)]) << l << " " << x;
  EXPECT_LE(rel_l2(ag, ac), dt == DType::BF16 ? 1e-3 : 1e-5) << "statistics, gradient, loss";
  EXPECT_NEAR(ag[static_cast<std::size_t>(L.loss())], ac[static_cast<std::size_t>(L.loss())], 1e-5);
  EXPECT_EQ(ag, first) << "a second pass changed bits";
  EXPECT_LE(d.rel(dl), tol(dt));
}

// The shared experts' gate: y = sigmoid(g) x, its backward with and without accumulation.
TEST_P(GpuMoe, SigmoidGateMatchesTheCpu) {
  REMAT_REQUIRE_GPU();
  const DType dt = GetParam();
  Dual d;
  const std::int64_t M = 77;
  const int K = 96;
  Both x = d.random(dt, M * K, -2, 2, 11), g = d.random(dt, M, -3, 3, 12), y = d.poisoned(dt, M * K);
  Both dy = d.random(dt, M * K, -1, 1, 13), dx = d.poisoned(dt, M * K), dg = d.random(dt, M, -1, 1, 14);
  for (bool c : {true, false}) {
    Backend& be = c ? static_cast<Backend&>(d.cpu) : static_cast<Backend&>(*d.gpu);
    OpArgs a;
    a.in[0] = c ? &x.c : &x.g, a.in[1] = c ? &g.c : &g.g, a.out[0] = c ? &y.c : &y.g, a.M = M, a.K = K;
    be.run(OpKind::SigmoidGate, Pass::Forward, a);
    a.dout[0] = c ? &dy.c : &dy.g, a.din[0] = c ? &dx.c : &dx.g, a.din[1] = c ? &dg.c : &dg.g, a.acc[1] = true;
    be.run(OpKind::SigmoidGate, Pass::Backward, a);
  }
  d.gpu->synchronize();
  EXPECT_LE(d.rel(y), tol(dt));
  EXPECT_LE(d.rel(dx), tol(dt));
  EXPECT_LE(d.rel(dg), tol(dt));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuMoe, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& i) { return std::string(i.param == DType::BF16 ? "bf16" : "fp32"); });

}  // namespace
}  // namespace remat::gputest
