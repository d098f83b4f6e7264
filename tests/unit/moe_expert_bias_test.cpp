// Experts with biases (gpt-oss; the moe object's "expert_bias"): the experts' projections add
// their expert's bias row, the backward sums each expert's rows of dy into its bias gradient
// (padding rows add nothing), the parameters, steps and config, and every policy runs the
// model bitwise as `none` does.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/backend/moe_rows.h"
#include "core/engine/simulator.h"
#include "core/graph/block_graph.h"
#include "core/model/param_layout.h"
#include "cpu_test_util.h"
#include "policy_test_util.h"

namespace remat {
namespace {

ModelConfig biased_moe_model(bool bias, double capacity) {
  ModelConfig m;
  set_family(m, Family::Mixtral);
  m.layers = 2;
  m.hidden = 16;
  m.heads = 2;
  m.kv_heads = 1;
  m.ffn = 24;
  m.seq = 8;
  m.batch = 2;
  m.vocab = 32;
  m.positions = 8;
  m.moe = MoeConfig{4, 2, 12, true, capacity};
  m.moe.expert_bias = bias;
  m.validate();
  return m;
}

TEST(MoeExpertBias, EachRowAddsItsExpertsBiasAndItsGradientSumsTheRows) {
  for (std::int64_t cap : {0, 3}) {
    SCOPED_TRACE(cap);
    const std::int64_t T = 10;
    const int E = 4, k = 2, K = 6, N = 5;
    MoeDims d;
    d.experts = E, d.top_k = k, d.tokens = T, d.capacity = cap, d.norm_topk = true;
    cputest::Env env;
    const auto logits = cputest::randv(T * E, 31, -2.0f, 2.0f), w = cputest::randv(E * N * K, 32),
               b = cputest::randv(E * N, 33), dyv = cputest::randv(d.rows() * N, 34);
    auto x = cputest::randv(d.rows() * K, 35);
    Tensor tl = env.from(logits), tw = env.make(DType::F32, T * k), tr = env.make(DType::I32, 2 * T * k + 2 * E),
           tx = env.from(x), twt = env.from(w), tb = env.from(b), ty = env.make(DType::F32, d.rows() * N),
           tdy = env.from(dyv), tdw = env.make(DType::F32, E * N * K), tdb = env.make(DType::F32, E * N);
    OpArgs a;
    a.moe = d;
    a.in[0] = &tl, a.out[0] = &tw, a.out[1] = &tr, a.M = T, a.K = k, a.N = E;
    env.be.run(OpKind::MoeRoute, Pass::Forward, a);
    a = OpArgs{};
    a.moe = d;
    a.in[0] = &tx, a.in[1] = &tr, a.out[0] = &ty, a.w = &twt, a.b = &tb, a.M = d.rows(), a.K = K, a.N = N;
    env.be.run(OpKind::ExpertLinear, Pass::Forward, a);
    const auto* table = tr.as<std::int32_t>();
    const MoeTable mt(d);
    const auto y = env.get(ty);
    std::vector<double> want_db(static_cast<std::size_t>(E * N), 0.0);
    int rows_checked = 0;
    for (int e = 0; e < E; ++e) {
      const std::int64_t start = table[mt.start + e], count = table[mt.count + e];
      const std::int64_t rows = moe_expert_rows(d, count);  // with a capacity: the padding too
      for (std::int64_t r = start; r < start + rows; ++r, ++rows_checked)
        for (int n = 0; n < N; ++n) {
          double s = b[e * N + n];
          for (int i = 0; i < K; ++i) s += double(w[(e * N + n) * K + i]) * x[r * K + i];
          EXPECT_NEAR(y[r * N + n], s, 1e-5) << "expert " << e << " row " << r;
          want_db[e * N + n] += dyv[r * N + n];
        }
    }
    EXPECT_GT(rows_checked, 0);
    // Backward twice: the bias gradient adds its sums each time (as the weights' does).
    a.out[0] = nullptr, a.dout[0] = &tdy, a.dw = &tdw, a.db = &tdb;
    env.be.run(OpKind::ExpertLinear, Pass::Backward, a);
    cputest::expect_near_all("db", env.get(tdb), want_db, 1e-5, 1e-5);
    env.be.run(OpKind::ExpertLinear, Pass::Backward, a);
    for (double& v : want_db) v *= 2;
    cputest::expect_near_all("db twice", env.get(tdb), want_db, 1e-5, 1e-5);
  }
}

TEST(MoeExpertBias, ParametersConfigAndRunsBitwiseAsNone) {
  const ModelConfig plain = biased_moe_model(false, 0.0), m = biased_moe_model(true, 0.0);
  const ParamLayout with(m), without(plain);
  // Two biases per layer: the fused gate_up's (experts · 2 · ffn) and the down projection's.
  EXPECT_EQ(with.total() - without.total(), 2 * (4 * 2 * 12 + 4 * 16));
  nlohmann::json j = model_to_json(m);
  EXPECT_EQ(j.at("moe").at("expert_bias"), true);
  EXPECT_TRUE(model_from_json(j).moe.expert_bias);
  // The experts' steps read their biases and count their additions: rows · width more FLOPs.
  const BlockGraph g(m), gp(plain);
  int biased = 0;
  for (std::size_t i = 0; i < g.steps().size(); ++i) {
    const StepDef& s = g.steps()[i];
    if (s.op != OpKind::ExpertLinear) continue;
    ++biased;
    EXPECT_EQ(s.b, s.name == "moe.fc" ? "mlp.experts.fc.b" : "mlp.experts.fc2.b");
    EXPECT_EQ(s.fwd_flops(false), gp.steps()[i].fwd_flops(false) + static_cast<std::uint64_t>(s.M) * s.N);
  }
  EXPECT_EQ(biased, 2);
  const Trace base = test::run(m, test::plan("none", m), 2, 0);
  ASSERT_EQ(base.losses().size(), 2u);
  for (const std::string p : {"selective:modules=moe", "selective:modules=moe_act", "uniform:segments=1", "optimal"}) {
    const Schedule s = test::plan(p, m);
    const Trace t = test::run(m, s, 2, 0);
    EXPECT_EQ(t.losses(), base.losses()) << p;
    EXPECT_EQ(t.grad_checksum, base.grad_checksum) << p;
    EXPECT_EQ(t.activation_peak_bytes, simulate(m, s, nullptr).activation_peak_bytes) << p;
  }
  // With a capacity (padding rows): bitwise as none under a policy that recomputes the layer.
  const ModelConfig capped = biased_moe_model(true, 1.25);
  const Trace cb = test::run(capped, test::plan("none", capped), 2, 0);
  const Trace cr = test::run(capped, test::plan("selective:modules=moe", capped), 2, 0);
  EXPECT_EQ(cr.losses(), cb.losses());
  EXPECT_EQ(cr.grad_checksum, cb.grad_checksum);
}

}  // namespace
}  // namespace remat
