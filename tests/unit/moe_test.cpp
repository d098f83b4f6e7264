// The mixture-of-experts layer (core/model/moe_config.h): its block table and sizes, the CPU ops
// against a per-token reference written out here (routing, capacity drops, the experts' rows, the
// weighted sum) and against finite differences, and the config's refusals; experts with biases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/analysis/block_actions.h"
#include "core/backend/moe_rows.h"
#include "core/engine/simulator.h"
#include "core/graph/block_graph.h"
#include "core/io/safetensors.h"
#include "core/graph/parallel_layout.h"
#include "core/model/param_layout.h"
#include "core/util/json_io.h"
#include "cpu_test_util.h"
#include "policy_test_util.h"

namespace remat {
namespace {

ModelConfig moe_model(double capacity) {
  ModelConfig m;
  set_family(m, Family::Qwen3Moe);
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
  m.validate();
  return m;
}

TEST(MoeGraph, TableSizesFollowTheCapacityOrTheTokens) {
  for (double c : {0.0, 1.0, 1.5}) {
    SCOPED_TRACE(c);
    const ModelConfig m = moe_model(c);
    const BlockGraph g(m);
    const std::int64_t T = 16, k = 2, E = 4;
    const std::int64_t C = c > 0 ? static_cast<std::int64_t>(std::ceil(T * k / double(E) * c)) : 0;
    const std::int64_t R = c > 0 ? E * C : T * k;
    EXPECT_EQ(m.moe.capacity(T), C);
    auto numel = [&](const char* n) { return g.tensors()[static_cast<std::size_t>(*g.find(n))].numel; };
    EXPECT_EQ(numel("moe.logits"), T * E);
    EXPECT_EQ(numel("moe.weights"), T * k);
    EXPECT_EQ(numel("moe.routing"), 2 * T * k + 2 * E);
    EXPECT_EQ(numel("moe.xp"), R * 16);
    EXPECT_EQ(numel("moe.gate_up"), R * 24);
    EXPECT_EQ(numel("moe.act"), R * 12);
    EXPECT_EQ(numel("moe.down_out"), R * 16);
    EXPECT_FALSE(g.find("mlp.gate_up"));
    // Megatron-LM's modules: the whole layer and its activation.
    std::vector<std::string> names;
    for (const auto& r : g.recompute_modules()) names.push_back(r.name);
    EXPECT_NE(std::find(names.begin(), names.end(), "moe"), names.end());
    EXPECT_EQ(g.module_tensors({"moe_act"}), std::vector<std::string>{"moe.act"});
    EXPECT_THROW(g.module_tensors({"mlp"}), Error);
  }
}

TEST(MoeGraph, DenseLayersAmongExpertsHaveTheirOwnTable) {
  ModelConfig m = moe_model(0.0);
  m.layers = 3;
  LayerKind sparse{"sparse"};
  sparse.mlp = LayerMlp::Moe;
  m.layer_kinds = {LayerKind{"dense"}, sparse};
  m.layer_pattern = {0, 1, 1};
  m.validate();
  const BlockGraph g(m);
  ASSERT_EQ(g.table_count(), 2);
  EXPECT_FALSE(g.of(0).moe());
  EXPECT_TRUE(g.of(1).moe());
  EXPECT_TRUE(g.of(2).moe());
  EXPECT_TRUE(g.of(0).find("mlp.gate_up"));
  EXPECT_TRUE(g.of(2).find("moe.xp"));
  const ParamLayout layout(m);
  EXPECT_GE(layout.offset(0, "mlp.fc.w"), 0);
  EXPECT_LT(layout.offset(0, "mlp.experts.fc.w"), 0);
  EXPECT_EQ(layout.numel(1, "mlp.experts.fc.w"), 4 * 24 * 16);
  EXPECT_EQ(layout.numel(1, "mlp.experts.fc2.w"), 4 * 16 * 12);
  EXPECT_EQ(layout.numel(1, "mlp.router.w"), 4 * 16);
  const ParamSpec* up = layout.find("h.1.mlp.experts.fc.w");
  ASSERT_TRUE(up);
  ASSERT_EQ(up->hf_parts.size(), 8u);
  EXPECT_EQ(up->hf_parts[3].first, "model.layers.1.mlp.experts.1.up_proj.weight");
}

// The routing of `logits` [T, E] by hand: per token the top-k, its weights, and per expert the
// tokens it keeps (the highest weights up to the capacity, ties to the earlier token).
struct HandRouting {
  std::vector<std::vector<int>> expert;    // [T][k]
  std::vector<std::vector<float>> weight;  // [T][k]
  std::vector<std::vector<bool>> kept;     // [T][k]
};

HandRouting route_by_hand(const std::vector<float>& logits, const MoeDims& d) {
  const int E = d.experts, k = d.top_k;
  HandRouting h;
  std::vector<std::vector<std::pair<float, int>>> per(static_cast<std::size_t>(E));  // (weight, token)
  for (std::int64_t t = 0; t < d.tokens; ++t) {
    std::vector<double> p(static_cast<std::size_t>(E));
    double mx = -1e30, s = 0;
    for (int e = 0; e < E; ++e) mx = std::max(mx, double(logits[t * E + e]));
    for (int e = 0; e < E; ++e) s += (p[e] = std::exp(logits[t * E + e] - mx));
    for (auto& v : p) v /= s;
    std::vector<int> order(static_cast<std::size_t>(E));
    for (int e = 0; e < E; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    double chosen = 0;
    for (int j = 0; j < k; ++j) chosen += p[order[j]];
    h.expert.emplace_back(order.begin(), order.begin() + k);
    h.weight.emplace_back();
    for (int j = 0; j < k; ++j) h.weight.back().push_back(float(d.norm_topk ? p[order[j]] / chosen : p[order[j]]));
    h.kept.emplace_back(k, true);
    for (int j = 0; j < k; ++j) per[order[j]].push_back({h.weight.back()[j], int(t)});
  }
  if (d.capacity > 0)
    for (int e = 0; e < E; ++e) {
      auto v = per[e];
      std::stable_sort(v.begin(), v.end(), [](auto a, auto b) { return a.first > b.first; });
      for (std::size_t i = static_cast<std::size_t>(d.capacity); i < v.size(); ++i)
        for (int j = 0; j < k; ++j)
          if (h.expert[v[i].second][j] == e) h.kept[v[i].second][j] = false;
    }
  return h;
}

MoeDims dims(std::int64_t tokens, int E, int k, std::int64_t capacity, bool norm) {
  MoeDims d;
  d.experts = E, d.top_k = k, d.tokens = tokens, d.capacity = capacity, d.norm_topk = norm;
  return d;
}

// The whole layer's forward on the CPU ops against the per-token sum written out here:
// y[t] = sum over kept choices of w · down_e(silu(gate_e x) · up_e x).
TEST(MoeOps, ForwardEqualsThePerTokenSum) {
  for (std::int64_t cap : {0, 3}) {
    for (bool norm : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "capacity " << cap << " norm " << norm);
      const std::int64_t T = 12;
      const int E = 4, k = 2, H = 8, F = 6;
      const MoeDims d = dims(T, E, k, cap, norm);
      cputest::Env env;
      const auto x = cputest::randv(T * H, 11), logits = cputest::randv(T * E, 12, -2.0f, 2.0f);
      const auto w1 = cputest::randv(E * 2 * F * H, 13), w2 = cputest::randv(E * H * F, 14);
      Tensor tx = env.from(x), tl = env.from(logits), tw = env.make(DType::F32, T * k),
             tr = env.make(DType::I32, 2 * T * k + 2 * E), txp = env.make(DType::F32, d.rows() * H),
             tgu = env.make(DType::F32, d.rows() * 2 * F), tact = env.make(DType::F32, d.rows() * F),
             typ = env.make(DType::F32, d.rows() * H), ty = env.make(DType::F32, T * H), tw1 = env.from(w1),
             tw2 = env.from(w2);
      OpArgs a;
      a.moe = d;
      a.in[0] = &tl, a.out[0] = &tw, a.out[1] = &tr, a.M = T, a.K = k, a.N = E;
      env.be.run(OpKind::MoeRoute, Pass::Forward, a);
      a = OpArgs{};
      a.moe = d;
      a.in[0] = &tx, a.in[1] = &tr, a.out[0] = &txp, a.K = H;
      env.be.run(OpKind::MoePermute, Pass::Forward, a);
      a = OpArgs{};
      a.moe = d;
      a.in[0] = &txp, a.in[1] = &tr, a.out[0] = &tgu, a.w = &tw1, a.M = d.rows(), a.K = H, a.N = 2 * F;
      env.be.run(OpKind::ExpertLinear, Pass::Forward, a);
      env.be.swiglu_fwd(tgu, tact, d.rows(), F);
      a = OpArgs{};
      a.moe = d;
      a.in[0] = &tact, a.in[1] = &tr, a.out[0] = &typ, a.w = &tw2, a.M = d.rows(), a.K = F, a.N = H;
      env.be.run(OpKind::ExpertLinear, Pass::Forward, a);
      a = OpArgs{};
      a.moe = d;
      a.in[0] = &typ, a.in[1] = &tw, a.in[2] = &tr, a.out[0] = &ty, a.K = H;
      env.be.run(OpKind::MoeUnpermute, Pass::Forward, a);

      const HandRouting h = route_by_hand(logits, d);
      const auto* table = tr.as<std::int32_t>();
      const auto got_w = env.get(tw), got_y = env.get(ty);
      int dropped = 0;
      std::vector<double> want(static_cast<std::size_t>(T * H), 0.0);
      for (std::int64_t t = 0; t < T; ++t)
        for (int j = 0; j < k; ++j) {
          EXPECT_EQ(table[t * k + j], h.expert[t][j]) << "token " << t;
          EXPECT_NEAR(got_w[t * k + j], h.weight[t][j], 1e-6);
          EXPECT_EQ(table[T * k + t * k + j] >= 0, bool(h.kept[t][j])) << "token " << t << " choice " << j;
          if (!h.kept[t][j]) {
            ++dropped;
            continue;
          }
          const int e = h.expert[t][j];
          std::vector<double> act(static_cast<std::size_t>(F));
          for (int f = 0; f < F; ++f) {
            double g = 0, u = 0;
            for (int i = 0; i < H; ++i) {
              g += double(w1[(e * 2 * F + f) * H + i]) * x[t * H + i];
              u += double(w1[(e * 2 * F + F + f) * H + i]) * x[t * H + i];
            }
            act[f] = g / (1 + std::exp(-g)) * u;
          }
          for (int o = 0; o < H; ++o) {
            double s = 0;
            for (int f = 0; f < F; ++f) s += double(w2[(e * H + o) * F + f]) * act[f];
            want[t * H + o] += h.weight[t][j] * s;
          }
        }
      if (cap > 0) EXPECT_GT(dropped, 0) << "the capacity should drop some choices";
      else EXPECT_EQ(dropped, 0);
      cputest::expect_near_all("y", got_y, want, 1e-5, 1e-4);
    }
  }
}

// The shared experts: their steps in the table (Megatron-LM's `shared_experts`, inside `moe`),
// their parameters under Qwen2-MoE's names, the gate against central differences.
TEST(MoeShared, TableParametersAndGate) {
  ModelConfig m = moe_model(0.0);
  set_family(m, Family::Qwen2Moe);
  m.moe.shared_ffn = 20;
  m.moe.shared_gate = true;
  m.validate();
  const BlockGraph g(m);
  for (const char* t : {"moe.shared_gate_up", "moe.shared_act", "moe.shared_out", "moe.shared_gate", "moe.shared_gated"})
    EXPECT_TRUE(g.find(t)) << t;
  EXPECT_EQ(g.module_tensors({"shared_experts"}),
            (std::vector<std::string>{"moe.shared_gate_up", "moe.shared_act", "moe.shared_out", "moe.shared_gate"}));
  const auto all = g.module_tensors({"moe"});
  EXPECT_NE(std::find(all.begin(), all.end(), "moe.shared_act"), all.end());
  const ParamLayout layout(m);
  ASSERT_TRUE(layout.find("model.layers.1.mlp.shared_expert_gate.weight"));
  ASSERT_TRUE(layout.find("model.layers.1.mlp.shared_expert.down_proj.weight"));
  EXPECT_EQ(layout.numel(1, "mlp.shared.fc.w"), 2 * 20 * 16);
  EXPECT_EQ(layout.numel(1, "mlp.shared_gate.w"), 16);
  nlohmann::json j = model_to_json(m);
  EXPECT_EQ(model_from_json(j).moe, m.moe);
  j["moe"].erase("shared_ffn");
  EXPECT_THROW(model_from_json(j), ConfigError);  // a gate without shared experts

  cputest::Env env;
  const std::int64_t M = 5;
  const int K = 7;
  auto x = cputest::randv(M * K, 31), gl = cputest::randv(M, 32, -2.0f, 2.0f);
  const auto R = cputest::randv(M * K, 33);
  Tensor tx = env.from(x), tg = env.from(gl), ty = env.make(DType::F32, M * K);
  auto loss = [&] {
    env.set(tx, x), env.set(tg, gl);
    OpArgs a;
    a.in[0] = &tx, a.in[1] = &tg, a.out[0] = &ty, a.M = M, a.K = K;
    env.be.run(OpKind::SigmoidGate, Pass::Forward, a);
    return cputest::dotd(env.get(ty), R);
  };
  loss();
  Tensor tR = env.from(R), tdx = env.make(DType::F32, M * K), tdg = env.make(DType::F32, M);
  OpArgs a;
  a.in[0] = &tx, a.in[1] = &tg, a.dout[0] = &tR, a.din[0] = &tdx, a.din[1] = &tdg, a.M = M, a.K = K;
  env.be.run(OpKind::SigmoidGate, Pass::Backward, a);
  const auto dx = env.get(tdx), dg = env.get(tdg);
  cputest::expect_grad("x", x, dx, loss, 1e-3f, 1e-4, 1e-2);
  cputest::expect_grad("g", gl, dg, loss, 1e-3f, 1e-4, 1e-2);
}

// Route, permute and unpermute backward against central differences of a weighted sum of y.
TEST(MoeOps, BackwardMatchesFiniteDifferences) {
  for (bool norm : {false, true}) {
    SCOPED_TRACE(norm);
    const std::int64_t T = 6;
    const int E = 4, k = 2, H = 5;
    const MoeDims d = dims(T, E, k, 0, norm);
    cputest::Env env;
    auto x = cputest::randv(T * H, 21), logits = cputest::randv(T * E, 22, -1.0f, 1.0f);
    auto yp_in = cputest::randv(T * k * H, 23);
    const auto R = cputest::randv(T * H, 24);
    auto shared = cputest::randv(T * H, 25);
    Tensor tx = env.from(x), tl = env.from(logits), tw = env.make(DType::F32, T * k),
           tr = env.make(DType::I32, 2 * T * k + 2 * E), txp = env.make(DType::F32, T * k * H),
           ty = env.make(DType::F32, T * H), typ = env.from(yp_in), tsh = env.from(shared);
    // loss = sum R · unpermute(permute(x) + yp_in, route(logits)): x reaches y through the rows.
    auto forward = [&] {
      env.set(tx, x), env.set(tl, logits), env.set(tsh, shared);
      OpArgs a;
      a.moe = d;
      a.in[0] = &tl, a.out[0] = &tw, a.out[1] = &tr, a.M = T, a.K = k, a.N = E;
      env.be.run(OpKind::MoeRoute, Pass::Forward, a);
      a = OpArgs{};
      a.moe = d, a.in[0] = &tx, a.in[1] = &tr, a.out[0] = &txp, a.K = H;
      env.be.run(OpKind::MoePermute, Pass::Forward, a);
      auto xp = env.get(txp);
      for (std::size_t i = 0; i < xp.size(); ++i) xp[i] += yp_in[i];
      env.set(typ, xp);
      a = OpArgs{};
      a.moe = d, a.in[0] = &typ, a.in[1] = &tw, a.in[2] = &tr, a.in[3] = &tsh, a.out[0] = &ty, a.K = H;
      env.be.run(OpKind::MoeUnpermute, Pass::Forward, a);
      return cputest::dotd(env.get(ty), R);
    };
    forward();
    Tensor tR = env.from(R), tdyp = env.make(DType::F32, T * k * H), tdw = env.make(DType::F32, T * k),
           tdl = env.make(DType::F32, T * E), tdx = env.make(DType::F32, T * H), tdsh = env.make(DType::F32, T * H);
    OpArgs a;
    a.moe = d, a.in[0] = &typ, a.in[1] = &tw, a.in[2] = &tr, a.in[3] = &tsh, a.dout[0] = &tR, a.din[0] = &tdyp,
    a.din[1] = &tdw, a.din[3] = &tdsh, a.K = H;
    env.be.run(OpKind::MoeUnpermute, Pass::Backward, a);
    a = OpArgs{};
    a.moe = d, a.in[0] = &tl, a.out[0] = &tw, a.out[1] = &tr, a.dout[0] = &tdw, a.din[0] = &tdl, a.M = T, a.K = k, a.N = E;
    env.be.run(OpKind::MoeRoute, Pass::Backward, a);
    a = OpArgs{};
    a.moe = d, a.in[0] = &tx, a.in[1] = &tr, a.dout[0] = &tdyp, a.din[0] = &tdx, a.K = H;
    env.be.run(OpKind::MoePermute, Pass::Backward, a);
    const auto dl = env.get(tdl), dx = env.get(tdx), dsh = env.get(tdsh);
    cputest::expect_grad("shared", shared, dsh, forward, 1e-3f, 1e-4, 1e-2, 24);
    cputest::expect_grad("logits", logits, dl, forward, 1e-3f, 1e-4, 1e-2, 24);
    cputest::expect_grad("x", x, dx, forward, 1e-3f, 1e-4, 1e-2, 24);
  }
}

nlohmann::json moe_json() {
  return nlohmann::json{{"architecture", "qwen3_moe"}, {"layers", 2},  {"hidden", 16}, {"heads", 2},
                        {"kv_heads", 1},               {"ffn", 24},    {"seq", 8},     {"batch", 2},
                        {"vocab", 32},                 {"positions", 8},
                        {"moe", {{"experts", 4}, {"top_k", 2}, {"ffn", 12}}}};
}

std::string refusal(const nlohmann::json& j) {
  try {
    model_from_json(j);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(MoeConfig, BadInputIsRefusedNamingTheFieldAndNumbers) {
  EXPECT_EQ(model_to_json(model_from_json(moe_json())), model_to_json(model_from_json(model_to_json(model_from_json(moe_json())))));
  EXPECT_EQ(model_from_json(moe_json()).moe, (MoeConfig{4, 2, 12}));
  auto with = [](const char* key, nlohmann::json v) {
    nlohmann::json j = moe_json();
    j["moe"][key] = v;
    return refusal(j);
  };
  EXPECT_NE(with("top_k", 5).find("moe.top_k: must be between 1 and the 4 experts, got 5"), std::string::npos) << with("top_k", 5);
  EXPECT_NE(with("capacity_factor", 0).find("moe.capacity_factor"), std::string::npos);
  EXPECT_NE(with("capacity_factor", -1.5).find("must be a positive factor"), std::string::npos);
  EXPECT_NE(with("experts", 0).find("moe.experts"), std::string::npos);
  EXPECT_NE(with("shared", 1).find("moe.shared: unknown key"), std::string::npos);
  EXPECT_NE(with("capacity_factor", 1e300).find("more than 2^31 - 1"), std::string::npos) << with("capacity_factor", 1e300);
  EXPECT_NE(with("groups", 3).find("moe.groups: 3 does not divide the 4 experts"), std::string::npos) << with("groups", 3);
  EXPECT_NE(with("score", "tanh").find("moe.score"), std::string::npos);
  EXPECT_NE(with("scaling", 0).find("moe.scaling"), std::string::npos);
  nlohmann::json grouped = moe_json();
  grouped["moe"]["groups"] = 2;
  grouped["moe"]["topk_groups"] = 3;
  EXPECT_NE(refusal(grouped).find("moe.topk_groups: must be between 1 and the 2 groups, got 3"), std::string::npos)
      << refusal(grouped);
  nlohmann::json bias = moe_json();
  bias["mlp_bias"] = true;
  EXPECT_NE(refusal(bias).find("mlp_bias"), std::string::npos) << refusal(bias);
  nlohmann::json kinds = moe_json();
  kinds.erase("moe");
  kinds["layer_kinds"] = {{{"name", "sparse"}, {"mlp", "moe"}}};
  kinds["layer_pattern"] = {"sparse"};
  EXPECT_NE(refusal(kinds).find("moe needs the model's experts"), std::string::npos) << refusal(kinds);
  nlohmann::json gpt2 = moe_json();
  gpt2["architecture"] = "gpt2";
  gpt2["kv_heads"] = 2;
  EXPECT_NE(refusal(gpt2).find("experts in a gpt2 block"), std::string::npos) << refusal(gpt2);
  ParallelLayout p;
  p.tp = 2;
  try {
    validate_layout(p, model_from_json(moe_json()));
    ADD_FAILURE() << "tp 2 with experts was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor parallelism of mixture-of-experts layers"), std::string::npos) << e.what();
  }
}

// A NaN logit ranks last (its token still goes to valid experts, the lowest indices among the
// NaNs); an expert out of range in the choices is refused, not written past.
TEST(MoeOps, NanLogitsStillRouteToValidExperts) {
  const MoeDims d = dims(3, 4, 2, 0, true);
  cputest::Env env;
  std::vector<float> logits = {NAN, NAN, NAN, NAN, 0.1f, NAN, 0.3f, 0.2f, 1, 2, 3, 4};
  Tensor tl = env.from(logits), tw = env.make(DType::F32, 6), tr = env.make(DType::I32, 2 * 6 + 8);
  OpArgs a;
  a.moe = d, a.in[0] = &tl, a.out[0] = &tw, a.out[1] = &tr, a.M = 3, a.K = 2, a.N = 4;
  env.be.run(OpKind::MoeRoute, Pass::Forward, a);
  const auto* e = tr.as<std::int32_t>();
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(e[i] >= 0 && e[i] < 4) << i << ": " << e[i];
  EXPECT_EQ(e[0], 0);
  EXPECT_EQ(e[1], 1);
  EXPECT_EQ(e[4], 3);  // the third token's largest two
  EXPECT_EQ(e[5], 2);
  std::vector<std::int32_t> bad = {0, 5}, row(2), start(4), count(4);
  std::vector<float> w(2, 0.5f);
  std::vector<std::int64_t> ids(2), off(5);
  EXPECT_THROW(moe_assign_rows(dims(1, 4, 2, 0, false), bad.data(), w.data(), row.data(), start.data(), count.data(),
                               ids.data(), off.data()),
               Error);
}

// DeepSeek-V3's router (sigmoid scores, a selection bias, group-limited choice, renormalised and
// scaled weights) against the same rules written out here in double precision, and its
// backward against central differences.
TEST(MoeOps, SigmoidGroupLimitedRouterFollowsItsRules) {
  const std::int64_t T = 24;
  const int E = 8, k = 3, G = 4, TG = 2;
  const double scaling = 2.5;
  MoeDims d = dims(T, E, k, 0, true);
  d.sigmoid = true, d.groups = G, d.topk_groups = TG, d.scaling = static_cast<float>(scaling);
  cputest::Env env;
  auto logits = cputest::randv(T * E, 41, -3.0f, 3.0f);
  const auto bias = cputest::randv(E, 42, -0.3f, 0.3f);
  Tensor tl = env.from(logits), tb = env.from(bias), tw = env.make(DType::F32, T * k), tr = env.make(DType::I32, 2 * T * k + 2 * E);
  auto route = [&] {
    env.set(tl, logits);
    OpArgs a;
    a.moe = d, a.in[0] = &tl, a.b = &tb, a.out[0] = &tw, a.out[1] = &tr, a.M = T, a.K = k, a.N = E;
    env.be.run(OpKind::MoeRoute, Pass::Forward, a);
  };
  route();
  const auto* table = tr.as<std::int32_t>();
  const auto w = env.get(tw);
  bool bias_mattered = false, groups_mattered = false;
  for (std::int64_t t = 0; t < T; ++t) {
    std::vector<double> s(E), c(E);
    for (int e = 0; e < E; ++e) s[e] = 1.0 / (1.0 + std::exp(-double(logits[t * E + e]))), c[e] = s[e] + bias[e];
    std::vector<std::pair<double, int>> gs;
    for (int g = 0; g < G; ++g) {
      std::vector<double> v(c.begin() + g * (E / G), c.begin() + (g + 1) * (E / G));
      std::sort(v.rbegin(), v.rend());
      gs.push_back({v[0] + v[1], g});
    }
    std::stable_sort(gs.begin(), gs.end(), [](auto a, auto b) { return a.first > b.first; });
    std::vector<bool> keep(G, false);
    for (int i = 0; i < TG; ++i) keep[gs[i].second] = true;
    std::vector<double> masked = c;
    for (int e = 0; e < E; ++e)
      if (!keep[e / (E / G)]) masked[e] = 0.0;
    std::vector<int> order(E), plain(E), unbiased(E);
    for (int e = 0; e < E; ++e) order[e] = plain[e] = unbiased[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return masked[a] > masked[b]; });
    std::stable_sort(plain.begin(), plain.end(), [&](int a, int b) { return c[a] > c[b]; });
    std::stable_sort(unbiased.begin(), unbiased.end(), [&](int a, int b) { return s[a] > s[b]; });
    double sum = 0;
    for (int j = 0; j < k; ++j) sum += s[order[j]];
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(table[t * k + j], order[j]) << "token " << t << " choice " << j;
      EXPECT_NEAR(w[t * k + j], s[order[j]] / sum * scaling, 2e-6) << "token " << t;
      groups_mattered = groups_mattered || order[j] != plain[j];
      bias_mattered = bias_mattered || plain[j] != unbiased[j];
    }
  }
  EXPECT_TRUE(groups_mattered && bias_mattered) << "the test's logits should exercise both";
  // Backward: loss = sum R · w, through the sigmoid scores (the bias gets nothing).
  const auto R = cputest::randv(T * k, 43);
  auto loss = [&] {
    route();
    return cputest::dotd(env.get(tw), R);
  };
  Tensor tR = env.from(R), tdl = env.make(DType::F32, T * E);
  OpArgs a;
  a.moe = d, a.in[0] = &tl, a.b = &tb, a.out[0] = &tw, a.out[1] = &tr, a.dout[0] = &tR, a.din[0] = &tdl, a.M = T, a.K = k, a.N = E;
  env.be.run(OpKind::MoeRoute, Pass::Backward, a);
  const auto dl = env.get(tdl);
  cputest::expect_grad("logits", logits, dl, loss, 1e-3f, 1e-4, 1e-2, 32);
}

// selective by a module only some tables have: the others drop nothing (not their default set).
TEST(MoePolicies, AModuleOnlyExpertLayersHaveLeavesDenseLayersWhole) {
  const ModelConfig m = test::tiny(Family::Qwen3Moe, AttentionImpl::Flash);  // block 1 dense
  const auto lines = block_actions(test::plan("selective:modules=moe", m));
  bool dense_whole = false, sparse_rebuilds = false;
  for (const auto& l : lines) {
    if (l.actions.find("rebuilding") != std::string::npos && l.actions.find("moe.") != std::string::npos)
      sparse_rebuilds = true;
    if (l.actions.find("mlp.act") != std::string::npos && l.actions.find("rebuilding") == std::string::npos)
      dense_whole = true;
  }
  EXPECT_TRUE(dense_whole);
  EXPECT_TRUE(sparse_rebuilds);
  // A tensor of the expert layers only is a valid name for both selective and budget.
  EXPECT_NO_THROW(test::plan("selective:recompute=moe.act", m));
  EXPECT_NO_THROW(test::plan("budget:recompute=moe.act", m, std::uint64_t{1} << 40));
}

nlohmann::json qwen3_moe_file() {
  return read_json_file(std::string(REMAT_TEST_DATA_DIR) + "/hf-configs/qwen3-30b-a3b.json");
}

std::string hf_refusal(const nlohmann::json& j) {
  try {
    model_from_hf_json(j, "x");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(MoeHfImport, SparseStepsDenseLayersAndRefusals) {
  const ModelConfig all = model_from_hf_json(qwen3_moe_file(), "q");
  EXPECT_EQ(all.moe, (MoeConfig{128, 8, 768, true, 0.0}));
  EXPECT_TRUE(all.layer_kinds.empty());
  EXPECT_TRUE(all.moe_in(47));
  nlohmann::json j = qwen3_moe_file();
  j["mlp_only_layers"] = {0, 5};
  j["decoder_sparse_step"] = 2;  // layers 1, 3, 5, ... sparse, but 5 listed dense
  const ModelConfig mixed = model_from_hf_json(j, "q");
  for (int l : {0, 2, 4, 5, 6}) EXPECT_FALSE(mixed.moe_in(l)) << l;
  for (int l : {1, 3, 7, 47}) EXPECT_TRUE(mixed.moe_in(l)) << l;
  const BlockGraph g(mixed);
  EXPECT_EQ(g.table_count(), 2);
  EXPECT_EQ(model_from_json(model_to_json(mixed)).layer_pattern, mixed.layer_pattern);
  const ParamLayout layout(mixed);
  EXPECT_EQ(layout.numel(0, "mlp.fc.w"), 2 * 6144 * 2048);
  EXPECT_EQ(layout.numel(1, "mlp.experts.fc.w"), 128ll * 2 * 768 * 2048);
  nlohmann::json bad = qwen3_moe_file();
  bad["num_experts_per_tok"] = 130;
  bad["router_aux_loss_coef"] = -1.0;
  bad["output_router_logits"] = true;
  bad["mlp_only_layers"] = {48};
  const std::string w = hf_refusal(bad);
  for (const char* words : {"num_experts_per_tok: 130 is more than the 128 experts (num_experts)",
                            "router_aux_loss_coef: the load-balancing loss's coefficient must be between 0 and 1e6, got -1",
                            "mlp_only_layers: entry 48"})
    EXPECT_NE(w.find(words), std::string::npos) << words << " in: " << w;
  nlohmann::json mixtral = read_json_file(std::string(REMAT_TEST_DATA_DIR) + "/hf-configs/mixtral-8x7b-v0.1.json");
  const ModelConfig mx = model_from_hf_json(mixtral, "m");
  EXPECT_EQ(mx.moe, (MoeConfig{8, 2, 14336, true, 0.0}));
  const ParamLayout ml(mx);
  ASSERT_TRUE(ml.find("model.layers.3.block_sparse_moe.gate.weight"));
  const ParamSpec* up = ml.find("h.3.mlp.experts.fc.w");
  ASSERT_TRUE(up);
  EXPECT_EQ(up->hf_parts[1].first, "model.layers.3.block_sparse_moe.experts.0.w3.weight");
  mixtral["router_jitter_noise"] = 0.01;
  EXPECT_NE(hf_refusal(mixtral).find("router_jitter_noise"), std::string::npos);
  // Windows on the later layers (Qwen's max_window_layers): attention kinds, every one sparse.
  nlohmann::json windowed = qwen3_moe_file();
  windowed["use_sliding_window"] = true;
  windowed["sliding_window"] = 4096;
  windowed["max_window_layers"] = 24;
  const ModelConfig wm = model_from_hf_json(windowed, "w");
  EXPECT_EQ(wm.window_of(30), 4096);
  EXPECT_EQ(wm.window_of(3), 0);
  for (int l : {0, 30, 47}) EXPECT_TRUE(wm.moe_in(l)) << l;
  // layer_types of another pattern keep each layer's MLP.
  nlohmann::json typed = qwen3_moe_file();
  typed["mlp_only_layers"] = {2};
  typed["sliding_window"] = 4096;
  typed["use_sliding_window"] = true;
  typed["max_window_layers"] = 48;
  typed["layer_types"] = nlohmann::json::array();
  for (int l = 0; l < 48; ++l) typed["layer_types"].push_back(l % 2 ? "sliding_attention" : "full_attention");
  const ModelConfig tm = model_from_hf_json(typed, "t");
  EXPECT_FALSE(tm.moe_in(2));
  EXPECT_TRUE(tm.moe_in(3));
  EXPECT_EQ(tm.window_of(3), 4096);
  EXPECT_EQ(tm.window_of(2), 0);
}

// Experts with biases (gpt-oss; the moe object's "expert_bias"): the experts' projections add
// their expert's bias row, the backward sums each expert's rows of dy into its bias gradient
// (padding rows add nothing), the parameters, steps and config, and every policy runs the
// model bitwise as `none` does.
ModelConfig biased_moe_model(bool bias, double capacity) {
  ModelConfig m = moe_model(capacity);
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
  // Written under Hugging Face names (each expert's projection's ".bias") and read back.
  std::vector<float> flat(static_cast<std::size_t>(with.total()));
  for (std::size_t i = 0; i < flat.size(); ++i) flat[i] = 0.001f * static_cast<float>(i % 977);
  std::map<std::string, SafeTensor> named;
  for (auto& [name, t] : hf_tensors(flat, with)) named.emplace(name, t);
  EXPECT_EQ(named.count("model.layers.1.mlp.experts.3.up_proj.bias"), 1u);
  EXPECT_EQ(named.count("model.layers.0.mlp.experts.0.down_proj.bias"), 1u);
  EXPECT_EQ(flat_from_hf(named, with, m.family, std::string("in memory")), flat);
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
