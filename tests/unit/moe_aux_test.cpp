// The load-balancing loss (core/backend/moe_aux.h, moe.aux_loss_coef): each layer's statistics
// and the loss against the formula written out here, its gradient through the router against
// finite differences, a run's loss with it, and the config's reading and refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/backend/moe_aux.h"
#include "core/engine/simulator.h"
#include "core/graph/parallel_layout.h"
#include "core/model/model_config.h"
#include "cpu_test_util.h"
#include "policy_test_util.h"

namespace remat {
namespace {

MoeDims aux_dims(std::int64_t T, int E, int k) {
  MoeDims d;
  d.experts = E, d.top_k = k, d.tokens = T, d.norm_topk = true;
  return d;
}

// One layer's router forward on `logits`, its statistics written into `stats`.
void route_with_stats(cputest::Env& env, const MoeDims& d, const Tensor& logits, const Tensor& w, const Tensor& r,
                      const Tensor& stats) {
  OpArgs a;
  a.moe = d;
  a.in[0] = &logits, a.out[0] = &w, a.out[1] = &r, a.aux = &stats;
  a.M = d.tokens, a.K = d.top_k, a.N = d.experts;
  env.be.run(OpKind::MoeRoute, Pass::Forward, a);
}

TEST(MoeAux, StatisticsLossAndGradientAgainstTheFormulaAndFiniteDifferences) {
  const std::int64_t T = 7;
  const int E = 5, k = 2, layers = 2;
  const double coef = 0.3;
  const MoeDims d = aux_dims(T, E, k);
  const MoeAuxLayout L{layers, E};
  cputest::Env env;
  std::vector<std::vector<float>> logits = {cputest::randv(T * E, 31, -2.0f, 2.0f),
                                            cputest::randv(T * E, 32, -2.0f, 2.0f)};
  Tensor buf = env.make(DType::F32, L.size()), w = env.make(DType::F32, T * k),
         r = env.make(DType::I32, 2 * T * k + 2 * E);
  std::vector<Tensor> tl = {env.from(logits[0]), env.from(logits[1])};
  auto loss_of = [&] {  // both layers' statistics, then the loss
    for (int l = 0; l < layers; ++l) {
      env.set(tl[static_cast<std::size_t>(l)], logits[static_cast<std::size_t>(l)]);
      const Tensor stats = buf.slice(L.stats(l), 2 * E);
      route_with_stats(env, d, tl[static_cast<std::size_t>(l)], w, r, stats);
    }
    env.be.moe_aux_loss(buf, layers, E, T, coef, 1.0);
    return static_cast<double>(env.get(buf)[static_cast<std::size_t>(L.loss())]);
  };
  const double loss = loss_of();
  // The formula, in double from the logits and the choices the router made.
  std::vector<double> C(E, 0.0), S(E, 0.0);
  for (int l = 0; l < layers; ++l) {
    env.set(tl[static_cast<std::size_t>(l)], logits[static_cast<std::size_t>(l)]);
    route_with_stats(env, d, tl[static_cast<std::size_t>(l)], w, r, buf.slice(L.stats(l), 2 * E));
    const std::vector<float> st = env.get(buf);
    const auto* chosen = r.as<const std::int32_t>();
    std::vector<double> c(E, 0.0), s(E, 0.0);
    for (std::int64_t t = 0; t < T; ++t) {
      const float* row = logits[static_cast<std::size_t>(l)].data() + t * E;
      double mx = row[0], z = 0.0;
      for (int e = 1; e < E; ++e) mx = std::max(mx, static_cast<double>(row[e]));
      for (int e = 0; e < E; ++e) z += std::exp(row[e] - mx);
      for (int e = 0; e < E; ++e) s[static_cast<std::size_t>(e)] += std::exp(row[e] - mx) / z;
      for (int j = 0; j < k; ++j) c[static_cast<std::size_t>(chosen[t * k + j])] += 1.0;
    }
    for (int e = 0; e < E; ++e) {
      EXPECT_EQ(st[static_cast<std::size_t>(L.stats(l) + e)], c[static_cast<std::size_t>(e)]) << l << " count " << e;
      EXPECT_NEAR(st[static_cast<std::size_t>(L.stats(l) + E + e)], s[static_cast<std::size_t>(e)], 1e-5) << l << " sum " << e;
      C[static_cast<std::size_t>(e)] += c[static_cast<std::size_t>(e)];
      S[static_cast<std::size_t>(e)] += s[static_cast<std::size_t>(e)];
    }
  }
  double want = 0.0, Ct = 0.0;
  const double rows = static_cast<double>(T) * layers;
  for (int e = 0; e < E; ++e) want += C[static_cast<std::size_t>(e)] * S[static_cast<std::size_t>(e)], Ct += C[static_cast<std::size_t>(e)];
  want *= coef * E / (rows * rows);
  EXPECT_EQ(Ct, rows * k);  // every choice counted once
  EXPECT_NEAR(loss, want, 1e-6 * want);
  EXPECT_GT(loss, 0.0);
  // Layer 0's logits' gradient: the router's backward with no weight gradient and the loss's
  // per-probability gradient g, against finite differences of sum_t sum_e g_e softmax(row t)_e
  // (the loss with the choices held, in double).
  loss_of();
  const Tensor g = buf.slice(L.grad(), E);
  const std::vector<float> gv = env.get(g);
  for (int e = 0; e < E; ++e)
    EXPECT_NEAR(gv[static_cast<std::size_t>(e)], coef * E * C[static_cast<std::size_t>(e)] / (rows * rows), 1e-7) << e;
  auto held = [&] {
    double f = 0.0;
    for (std::int64_t t = 0; t < T; ++t) {
      const float* row = logits[0].data() + t * E;
      double mx = row[0], z = 0.0;
      for (int e = 1; e < E; ++e) mx = std::max(mx, static_cast<double>(row[e]));
      for (int e = 0; e < E; ++e) z += std::exp(row[e] - mx);
      for (int e = 0; e < E; ++e) f += gv[static_cast<std::size_t>(e)] * std::exp(row[e] - mx) / z;
    }
    return f;
  };
  Tensor dw = env.make(DType::F32, T * k), dl = env.make(DType::F32, T * E);
  env.set(tl[0], logits[0]);
  route_with_stats(env, d, tl[0], w, r, buf.slice(L.stats(0), 2 * E));
  OpArgs a;
  a.moe = d;
  a.in[0] = &tl[0], a.out[0] = &w, a.out[1] = &r, a.dout[0] = &dw, a.din[0] = &dl, a.aux = &g;
  a.M = T, a.K = k, a.N = E;
  env.be.run(OpKind::MoeRoute, Pass::Backward, a);
  cputest::expect_grad("logits", logits[0], env.get(dl), held, 1e-3f, 1e-6, 1e-3, 24);
}

// A zero load-balancing gradient changes no bit of the router's gradient, and a sigmoid router
// is refused.
TEST(MoeAux, AZeroGradientChangesNothingAndSigmoidRoutersAreRefused) {
  const std::int64_t T = 9;
  const int E = 6, k = 3;
  MoeDims d = aux_dims(T, E, k);
  cputest::Env env;
  Tensor tl = env.from(cputest::randv(T * E, 41)), w = env.make(DType::F32, T * k),
         r = env.make(DType::I32, 2 * T * k + 2 * E), stats = env.make(DType::F32, 2 * E),
         zero = env.make(DType::F32, E), dw = env.from(cputest::randv(T * k, 42));
  route_with_stats(env, d, tl, w, r, stats);
  std::vector<std::vector<float>> grads;
  for (const Tensor* aux : std::vector<const Tensor*>{nullptr, &zero}) {
    Tensor dl = env.make(DType::F32, T * E);
    OpArgs a;
    a.moe = d;
    a.in[0] = &tl, a.out[0] = &w, a.out[1] = &r, a.dout[0] = &dw, a.din[0] = &dl, a.aux = aux;
    a.M = T, a.K = k, a.N = E;
    env.be.run(OpKind::MoeRoute, Pass::Backward, a);
    grads.push_back(env.get(dl));
  }
  EXPECT_EQ(grads[0], grads[1]);
  d.sigmoid = true;
  EXPECT_THROW(route_with_stats(env, d, tl, w, r, stats), Error);
}

ModelConfig aux_model(double coef) {
  ModelConfig m = test::tiny(Family::Mixtral, AttentionImpl::Flash, 2);
  m.moe.aux_loss_coef = coef;
  m.validate();
  return m;
}

// A run adds the loss to the step's (about coef · top_k, balanced or not) and its gradient to
// the routers'; its buffer is in the prediction.
TEST(MoeAux, ARunAddsTheLossAndItsGradient) {
  const ModelConfig off = aux_model(0.0), on = aux_model(0.5);
  const Trace a = test::run(off, test::plan("none", off), 1, 0);
  const Trace b = test::run(on, test::plan("none", on), 1, 0);
  ASSERT_EQ(a.losses().size(), 1u);
  ASSERT_EQ(b.losses().size(), 1u);
  const double added = b.losses()[0] - a.losses()[0];  // the first step: same weights, same batch
  EXPECT_GT(added, 0.5 * on.moe.top_k * 0.9);
  EXPECT_LT(added, 0.5 * on.moe.experts);
  EXPECT_NE(a.grad_checksum, b.grad_checksum);
  EXPECT_EQ(b.predicted_peak_bytes, b.peak_bytes);
}

// A run whose blocks have no MoE layer (its pattern's experts past its one block) has no
// load-balancing loss: the same loss and gradients as without the coefficient, not a NaN.
TEST(MoeAux, BlocksWithoutExpertsHaveNone) {
  ModelConfig m = test::tiny(Family::Qwen3Moe, AttentionImpl::Naive, 1);
  m.layer_pattern = {1, 0};  // block 0 dense
  m.validate();
  ASSERT_FALSE(m.moe_in(0));
  const Trace a = test::run(m, test::plan("none", m), 1, 0);
  m.moe.aux_loss_coef = 0.5;
  const Trace b = test::run(m, test::plan("none", m), 1, 0);
  ASSERT_EQ(b.losses().size(), 1u);
  EXPECT_TRUE(std::isfinite(b.losses()[0]));
  EXPECT_EQ(b.losses()[0], a.losses()[0]);
  EXPECT_EQ(b.grad_checksum, a.grad_checksum);
  EXPECT_EQ(b.peak_bytes, a.peak_bytes);
}

TEST(MoeAux, ReadFromTheConfigKeptAndRefused) {
  nlohmann::json j = model_to_json(aux_model(0.25));
  EXPECT_EQ(j.at("moe").at("aux_loss_coef"), 0.25);
  EXPECT_EQ(model_from_json(j).moe.aux_loss_coef, 0.25);
  j["moe"]["aux_loss_coef"] = -1.0;
  EXPECT_THROW(model_from_json(j), ConfigError);
  j["moe"]["aux_loss_coef"] = 0.1;
  j["moe"]["score"] = "sigmoid";
  try {
    model_from_json(j);
    ADD_FAILURE() << "a sigmoid router took the loss";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("softmax routers"), std::string::npos) << e.what();
  }
  // Hugging Face: only under output_router_logits, at router_aux_loss_coef (Mixtral's default 0.001).
  nlohmann::json hf = {{"model_type", "mixtral"},       {"hidden_size", 32},         {"intermediate_size", 48},
                       {"num_hidden_layers", 2},        {"num_attention_heads", 4},  {"num_key_value_heads", 2},
                       {"vocab_size", 64},              {"max_position_embeddings", 64},
                       {"num_local_experts", 4},        {"num_experts_per_tok", 2},  {"router_aux_loss_coef", 0.02}};
  EXPECT_EQ(model_from_hf_json(hf, "m").moe.aux_loss_coef, 0.0);
  hf["output_router_logits"] = true;
  EXPECT_EQ(model_from_hf_json(hf, "m").moe.aux_loss_coef, 0.02);
  hf.erase("router_aux_loss_coef");
  EXPECT_EQ(model_from_hf_json(hf, "m").moe.aux_loss_coef, 0.001);
  hf["router_aux_loss_coef"] = nullptr;
  EXPECT_THROW(model_from_hf_json(hf, "m"), ConfigError);
  // Across pipeline stages it is taken: every stage holds a buffer of the whole model's MoE
  // layers (stage 1's blocks have the second layer's statistics slot, not the first's), in its
  // prediction (tests/e2e/pipeline_e2e.py runs such stages against one process).
  ParallelLayout p;
  p.pp = 2;
  p.micro_batches = 2;
  ModelConfig on = aux_model(0.5), off = aux_model(0.0);
  on.batch = off.batch = 1;
  EXPECT_NO_THROW(validate_layout(p, on));
  for (int stage = 0; stage < 2; ++stage) {
    const Schedule none = store_all_schedule(1);
    const Prediction a = simulate_stage(on, p, stage, none, nullptr), b = simulate_stage(off, p, stage, none, nullptr);
    EXPECT_GT(a.peak_bytes, b.peak_bytes) << stage;
    EXPECT_EQ(a.static_bytes, b.static_bytes) << stage;
  }
}

}  // namespace
}  // namespace remat
