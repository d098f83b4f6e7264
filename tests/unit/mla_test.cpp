// Multi-head latent attention (core/model/mla_config.h): the MlaPack op against the layout and
// rotation written out here, its backward as the forward's transpose, the block's table and
// parameters, the published DeepSeek configs' reading, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/engine/pipeline_stage.h"
#include "core/engine/rank_prediction.h"
#include "core/graph/block_graph.h"
#include "core/plugin/registry.h"
#include "core/graph/parallel_layout.h"
#include "core/model/model_source.h"
#include "core/model/param_layout.h"
#include "cpu_test_util.h"
#include "policy_test_util.h"

namespace remat {
namespace {

struct MlaCase {
  int B = 2, S = 3, H = 2, d = 6, r = 4, dv = 3;
  AttnDims attn() const {
    AttnDims a;
    a.B = B, a.S = S, a.heads = a.kv_heads = H, a.d = d, a.dv = dv;
    return a;
  }
  std::int64_t rows() const { return static_cast<std::int64_t>(B) * S; }
  std::int64_t q_n() const { return rows() * H * d; }
  std::int64_t kv_n() const { return rows() * H * (d - r + dv); }
  std::int64_t pe_n() const { return rows() * r; }
  std::int64_t out_n() const { return rows() * (2 * H * d + H * dv); }
};

// The packed row as written in backend.h, in float64: per head q (nope, rotated rope), k (its
// nope from kv, the shared k_pe rotated), v (from kv).
std::vector<double> pack_by_hand(const MlaCase& p, const std::vector<float>& q, const std::vector<float>& kv,
                                 const std::vector<float>& pe, const std::vector<float>& inv_freq, float att) {
  const int dn = p.d - p.r, half = p.r / 2, kvh = dn + p.dv, w = 2 * p.H * p.d + p.H * p.dv;
  std::vector<double> out(static_cast<std::size_t>(p.out_n()));
  auto rot = [&](const float* x, double* o, int s) {
    for (int i = 0; i < half; ++i) {
      const float ang = static_cast<float>(s) * inv_freq[i];
      const double c = std::cos(ang) * att, sn = std::sin(ang) * att;
      o[i] = x[2 * i] * c - x[2 * i + 1] * sn;
      o[i + half] = x[2 * i + 1] * c + x[2 * i] * sn;
    }
  };
  for (std::int64_t t = 0; t < p.rows(); ++t) {
    const int s = static_cast<int>(t % p.S);
    double* o = out.data() + t * w;
    for (int h = 0; h < p.H; ++h) {
      const float* qh = q.data() + (t * p.H + h) * p.d;
      const float* kh = kv.data() + (t * p.H + h) * kvh;
      for (int j = 0; j < dn; ++j) o[h * p.d + j] = qh[j], o[(p.H + h) * p.d + j] = kh[j];
      for (int j = 0; j < p.dv; ++j) o[2 * p.H * p.d + h * p.dv + j] = kh[dn + j];
      rot(qh + dn, o + h * p.d + dn, s);
      rot(pe.data() + t * p.r, o + (p.H + h) * p.d + dn, s);
    }
  }
  return out;
}

TEST(MlaOps, PackPlacesAndRotatesAsWritten) {
  const MlaCase p;
  cputest::Env env;
  RopeFrequencies freqs;
  RopeTable rope = cputest::default_rope(freqs, p.r, 100.0f);
  rope.attention_scaling = 0.8f;
  const auto q = cputest::randv(p.q_n(), 1), kv = cputest::randv(p.kv_n(), 2), pe = cputest::randv(p.pe_n(), 3);
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(to_string(dt));
    Tensor tq = env.from(q, dt), tkv = env.from(kv, dt), tpe = env.from(pe, dt), to = env.make(dt, p.out_n());
    OpArgs a;
    a.attn = p.attn(), a.rope = rope, a.in[0] = &tq, a.in[1] = &tkv, a.in[2] = &tpe, a.out[0] = &to;
    env.be.run(OpKind::MlaPack, Pass::Forward, a);
    const auto bf = [&](const std::vector<float>& v) { return dt == DType::BF16 ? cputest::bf16v(v) : v; };
    const auto want = pack_by_hand(p, bf(q), bf(kv), bf(pe), freqs.inv_freq, rope.attention_scaling);
    cputest::expect_near_all("qkv", env.get(to), want, dt == DType::BF16 ? 1e-2 : 1e-6, dt == DType::BF16 ? 1e-2 : 1e-6);
  }
}

// The op is linear: <g, pack(x)> = <pack^T(g), x> for every input, and acc adds.
TEST(MlaOps, BackwardIsTheForwardsTransposeAndAccumulates) {
  const MlaCase p;
  cputest::Env env;
  RopeFrequencies freqs;
  const RopeTable rope = cputest::default_rope(freqs, p.r, 10.0f);
  const auto q = cputest::randv(p.q_n(), 4), kv = cputest::randv(p.kv_n(), 5), pe = cputest::randv(p.pe_n(), 6);
  const auto g = cputest::randv(p.out_n(), 7);
  Tensor tq = env.from(q), tkv = env.from(kv), tpe = env.from(pe), to = env.make(DType::F32, p.out_n());
  OpArgs a;
  a.attn = p.attn(), a.rope = rope, a.in[0] = &tq, a.in[1] = &tkv, a.in[2] = &tpe, a.out[0] = &to;
  env.be.run(OpKind::MlaPack, Pass::Forward, a);
  const double lhs = cputest::dotd(env.get(to), g);
  Tensor tg = env.from(g), dq = env.make(DType::F32, p.q_n()), dkv = env.make(DType::F32, p.kv_n()),
         dpe = env.make(DType::F32, p.pe_n());
  a.dout[0] = &tg, a.din[0] = &dq, a.din[1] = &dkv, a.din[2] = &dpe;
  env.be.run(OpKind::MlaPack, Pass::Backward, a);
  const auto gq = env.get(dq), gkv = env.get(dkv), gpe = env.get(dpe);
  const double rhs = cputest::dotd(gq, q) + cputest::dotd(gkv, kv) + cputest::dotd(gpe, pe);
  EXPECT_NEAR(lhs, rhs, 1e-4 * std::max(1.0, std::fabs(lhs)));
  double pe_norm = 0;
  for (float x : gpe) pe_norm += std::fabs(x);
  EXPECT_GT(pe_norm, 0.1) << "the shared key part gets the heads' gradient";
  a.acc[0] = a.acc[1] = a.acc[2] = true;
  env.be.run(OpKind::MlaPack, Pass::Backward, a);
  const auto q2 = env.get(dq), pe2 = env.get(dpe);
  for (std::size_t i = 0; i < q2.size(); ++i) EXPECT_NEAR(q2[i], 2 * gq[i], 1e-6);
  for (std::size_t i = 0; i < pe2.size(); ++i) EXPECT_NEAR(pe2[i], 2 * gpe[i], 1e-5);
  AttnDims bad = p.attn();
  bad.kv_heads = 1;
  a.attn = bad;
  EXPECT_THROW(env.be.run(OpKind::MlaPack, Pass::Forward, a), Error);
}

TEST(MlaGraph, TheBlockProjectsThroughLatentsAndUpProjectsInItsModule) {
  const ModelConfig m = test::tiny(Family::DeepseekV3, AttentionImpl::Flash);
  const BlockGraph g(m);
  const std::int64_t T = m.tokens();
  auto numel = [&](const char* t) { return g.tensors()[static_cast<std::size_t>(*g.find(t))].numel; };
  EXPECT_EQ(numel("attn.q_latent"), T * 24);
  EXPECT_EQ(numel("attn.kv_latent"), T * 32);
  EXPECT_EQ(numel("attn.k_pe"), T * 4);
  EXPECT_EQ(numel("attn.qkv"), T * (2 * 4 * 16 + 4 * 10));
  EXPECT_EQ(numel("attn.ctx"), T * 4 * 10);
  std::vector<std::string> up;
  for (const RecomputeModule& r : g.recompute_modules())
    if (r.name == "mla_up_proj") up = r.tensors;
  EXPECT_EQ(up, std::vector<std::string>{"attn.qkv"});
  // Parameters: the down projection of k and v as one Hugging Face tensor over two of ours.
  const ParamLayout L(m);
  const ParamSpec* kva = L.find("h.1.attn.kv_a.w");
  const ParamSpec* kpe = L.find("h.1.attn.k_rope.w");
  ASSERT_TRUE(kva && kpe);
  EXPECT_EQ(kva->hf_name, "model.layers.1.self_attn.kv_a_proj_with_mqa.weight");
  EXPECT_EQ(kva->hf_rows, 32 + 4);
  EXPECT_EQ(kpe->offset, kva->offset + kva->numel());
  EXPECT_EQ(kpe->hf_name, "");
  EXPECT_EQ(L.numel(1, "attn.proj.w"), 64 * 4 * 10);
  EXPECT_NE(L.find("model.layers.1.mlp.shared_experts.down_proj.weight"), nullptr);
}

nlohmann::json mla_json() {
  return {{"architecture", "deepseek_v3"}, {"layers", 2}, {"hidden", 32}, {"heads", 4}, {"kv_heads", 4}, {"ffn", 48},
          {"seq", 8}, {"batch", 1}, {"vocab", 64}, {"positions", 16},
          {"mla", {{"q_rank", 12}, {"kv_rank", 16}, {"nope_dim", 8}, {"rope_dim", 4}, {"v_dim", 6}}}};
}

std::string mla_refusal(const nlohmann::json& j) {
  try {
    model_from_json(j);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(MlaConfig, KeptByOurJsonAndBadInputRefusedNamingTheField) {
  const ModelConfig m = model_from_json(mla_json());
  EXPECT_EQ(m.mla, (MlaConfig{12, 16, 8, 4, 6}));
  EXPECT_EQ(m.head_dim(), 12);
  EXPECT_EQ(m.v_head_dim(), 6);
  EXPECT_EQ(m.rotary_dim(), 4);
  EXPECT_EQ(model_from_json(model_to_json(m)).mla, m.mla);
  auto with = [](const char* key, nlohmann::json v) {
    nlohmann::json j = mla_json();
    j["mla"][key] = v;
    return mla_refusal(j);
  };
  EXPECT_NE(with("kv_rank", 40).find("mla.kv_rank: 40 is larger than the hidden size 32"), std::string::npos) << with("kv_rank", 40);
  EXPECT_NE(with("q_rank", 33).find("mla.q_rank: 33 is larger than the hidden size 32"), std::string::npos);
  EXPECT_NE(with("rope_dim", 3).find("mla.rope_dim: the rotated dims come in pairs"), std::string::npos);
  EXPECT_NE(with("v_dim", 0).find("mla.v_dim"), std::string::npos);
  EXPECT_NE(with("rank", 1).find("mla.rank: unknown key"), std::string::npos);
  nlohmann::json missing = mla_json();
  missing["mla"].erase("nope_dim");
  EXPECT_NE(mla_refusal(missing).find("mla.nope_dim: missing"), std::string::npos);
  nlohmann::json gqa = mla_json();
  gqa["kv_heads"] = 2;
  EXPECT_NE(mla_refusal(gqa).find("kv_heads (2) must equal heads (4)"), std::string::npos) << mla_refusal(gqa);
  nlohmann::json llama = mla_json();
  llama["architecture"] = "llama";
  EXPECT_NE(mla_refusal(llama).find("named in deepseek_v2 and deepseek_v3 only"), std::string::npos) << mla_refusal(llama);
  ParallelLayout p;
  p.tp = 2;
  try {
    validate_layout(p, m);
    ADD_FAILURE() << "tp 2 with latent attention was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("multi-head latent attention"), std::string::npos) << e.what();
  }
}

nlohmann::json mla_published(const char* file) {
  std::ifstream in(std::string(REMAT_TEST_DATA_DIR) + "/hf-configs/" + file);
  return nlohmann::json::parse(in);
}

std::string mla_hf_refusal(const nlohmann::json& j) {
  try {
    model_from_hf_json(j, "x");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(MlaHfImport, PublishedDeepSeekConfigsAsTransformersReadsThem) {
  const ModelConfig v3 = model_from_hf_json(mla_published("deepseek-v3.json"), "v3");
  EXPECT_EQ(v3.mla, (MlaConfig{1536, 512, 128, 64, 128}));
  const double ms = 0.1 * std::log(40.0) + 1.0;  // mscale_all_dim 1
  EXPECT_NEAR(v3.attn_scale, ms * ms / std::sqrt(192.0), 1e-12);
  EXPECT_FALSE(v3.moe_in(2));
  EXPECT_TRUE(v3.moe_in(3));
  EXPECT_TRUE(v3.moe.sigmoid && v3.moe.score_bias && !v3.moe.group_max);
  EXPECT_EQ(v3.moe.groups, 8);
  EXPECT_EQ(v3.moe.topk_groups, 4);
  EXPECT_EQ(v3.moe.shared_ffn, 2048);
  EXPECT_DOUBLE_EQ(v3.moe.scaling, 2.5);
  const ModelConfig lite = model_from_hf_json(mla_published("deepseek-v2-lite.json"), "lite");
  EXPECT_EQ(lite.mla.q_rank, 0);
  EXPECT_EQ(lite.moe.groups, 0);  // greedy
  EXPECT_FALSE(lite.moe.norm_topk || lite.moe.sigmoid);
  const ModelConfig v2 = model_from_hf_json(mla_published("deepseek-v2.json"), "v2");
  EXPECT_TRUE(v2.moe.group_max);
  EXPECT_EQ(v2.moe.topk_groups, 3);
  EXPECT_DOUBLE_EQ(v2.moe.scaling, 16.0);
  // The preset is the published model at its own sequence length and attention.
  ModelConfig preset = resolve_model("deepseek-v3");
  EXPECT_EQ(preset.mla, v3.mla);
  EXPECT_EQ(preset.moe, v3.moe);
  EXPECT_DOUBLE_EQ(preset.attn_scale, v3.attn_scale);
  EXPECT_EQ(preset.rope_scaling, v3.rope_scaling);
  for (int l = 0; l < v3.layers; ++l) EXPECT_EQ(preset.moe_in(l), v3.moe_in(l)) << l;
  EXPECT_EQ(ParamLayout(preset).total(), ParamLayout(v3).total());
  // Refused, naming the field.
  nlohmann::json j = mla_published("deepseek-v3.json");
  j["rope_interleave"] = false;
  EXPECT_NE(mla_hf_refusal(j).find("rope_interleave"), std::string::npos) << mla_hf_refusal(j);
  j = mla_published("deepseek-v3.json");
  j["topk_method"] = "greedy";
  EXPECT_NE(mla_hf_refusal(j).find("topk_method: 'greedy' is not modelled for deepseek_v3"), std::string::npos) << mla_hf_refusal(j);
  j = mla_published("deepseek-v3.json");
  j["kv_lora_rank"] = 8000;
  EXPECT_NE(mla_hf_refusal(j).find("kv_lora_rank: 8000 is larger than the hidden size 7168"), std::string::npos) << mla_hf_refusal(j);
  EXPECT_EQ(mla_hf_refusal(j).find("also"), std::string::npos) << "one problem, said once: " << mla_hf_refusal(j);
  j = mla_published("deepseek-v3.json");
  j["qk_rope_head_dim"] = 63;
  EXPECT_NE(mla_hf_refusal(j).find("qk_rope_head_dim: the rotated dims come in pairs"), std::string::npos) << mla_hf_refusal(j);
  j = mla_published("deepseek-v2-lite.json");
  j["num_experts_per_tok"] = 65;
  EXPECT_NE(mla_hf_refusal(j).find("num_experts_per_tok: 65 is more than the 64 experts"), std::string::npos) << mla_hf_refusal(j);
  j = mla_published("deepseek-v2.json");
  j["n_group"] = 7;
  EXPECT_NE(mla_hf_refusal(j).find("7 does not divide the 160 experts"), std::string::npos) << mla_hf_refusal(j);
}

// Fields a file leaves out take transformers' defaults (V3's are its published values).
TEST(MlaHfImport, AbsentFieldsTakeTransformersDefaults) {
  const ModelConfig v3 = model_from_hf_json(mla_published("deepseek-v3.json"), "v3");
  nlohmann::json j = mla_published("deepseek-v3.json");
  for (const char* k : {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                        "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
                        "first_k_dense_replace", "norm_topk_prob", "routed_scaling_factor", "n_group", "topk_group",
                        "scoring_func", "topk_method"})
    j.erase(k);
  const ModelConfig bare = model_from_hf_json(j, "bare");
  EXPECT_EQ(bare.mla, v3.mla);
  EXPECT_EQ(bare.moe, v3.moe);
  EXPECT_EQ(bare.layer_pattern, v3.layer_pattern);
  // null q_lora_rank: a plain q projection; a key part of 0 dims is a model too.
  j = mla_published("deepseek-v2-lite.json");
  j["qk_nope_head_dim"] = 0;
  const ModelConfig no_nope = model_from_hf_json(j, "x");
  EXPECT_EQ(no_nope.mla.q_rank, 0);
  EXPECT_EQ(no_nope.head_dim(), 64);
  // hidden not divisible by the heads: V3's latent heads are their own width; transformers' V2
  // config refuses it.
  j = mla_published("deepseek-v3.json");
  j["hidden_size"] = 7040;
  EXPECT_EQ(model_from_hf_json(j, "x").hidden, 7040);
  j = mla_published("deepseek-v2-lite.json");
  j["hidden_size"] = 2040;
  EXPECT_NE(mla_hf_refusal(j).find("num_attention_heads"), std::string::npos) << mla_hf_refusal(j);
  // V2's defaults (64 experts of 1407, 2 shared, weights x 1, no dense layer); its top-k is required.
  j = mla_published("deepseek-v2-lite.json");
  for (const char* k : {"n_routed_experts", "moe_intermediate_size", "n_shared_experts", "routed_scaling_factor",
                        "first_k_dense_replace"})
    j.erase(k);
  const ModelConfig v2 = model_from_hf_json(j, "x");
  EXPECT_EQ(v2.moe.experts, 64);
  EXPECT_EQ(v2.moe.ffn, 1407);
  EXPECT_EQ(v2.moe.shared_ffn, 2 * 1407);
  EXPECT_DOUBLE_EQ(v2.moe.scaling, 1.0);
  EXPECT_TRUE(v2.moe_in(0));
  j.erase("num_experts_per_tok");
  EXPECT_NE(mla_hf_refusal(j).find("num_experts_per_tok"), std::string::npos) << mla_hf_refusal(j);
  // Nulls as transformers reads them: norm_topk_prob null is false; n_group null cannot route.
  j = mla_published("deepseek-v3.json");
  j["norm_topk_prob"] = nullptr;
  EXPECT_FALSE(model_from_hf_json(j, "x").moe.norm_topk);
  j = mla_published("deepseek-v3.json");
  j["n_group"] = nullptr;
  EXPECT_NE(mla_hf_refusal(j).find("n_group"), std::string::npos) << mla_hf_refusal(j);
  j = mla_published("deepseek-v3.json");
  j["n_routed_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  j.erase("n_group");
  EXPECT_NE(mla_hf_refusal(j).find("n_group: 8 groups of 1 expert"), std::string::npos) << mla_hf_refusal(j);
  j = mla_published("deepseek-v3.json");
  j["v_head_dim"] = 100000;
  EXPECT_NE(mla_hf_refusal(j).find("v_head_dim: at most 65536"), std::string::npos) << mla_hf_refusal(j);
}

TEST(MlaConfig, FamilyAndAttentionGoTogether) {
  nlohmann::json j = mla_json();
  j.erase("mla");
  EXPECT_NE(mla_refusal(j).find("deepseek_v3's attention is latent"), std::string::npos) << mla_refusal(j);
  ModelConfig m = model_from_json(mla_json());
  set_family(m, Family::Llama);
  EXPECT_FALSE(m.mla.on()) << "a family without latent attention leaves none behind";
  j = mla_json();
  j["mla"]["v_dim"] = 1000000000;
  EXPECT_NE(mla_refusal(j).find("mla.v_dim: at most 65536"), std::string::npos) << mla_refusal(j);
  j = mla_json();
  j["layer_kinds"] = {{{"name", "a"}}, {{"name", "b"}, {"rope", false}}};
  j["layer_pattern"] = {"a", "b"};
  EXPECT_NE(mla_refusal(j).find("latent attention always rotates"), std::string::npos) << mla_refusal(j);
}

// Pipeline stages of a model whose first layer is dense: each stage's parameters and plan are its
// own blocks' (the second stage's are all experts).
TEST(MlaPipeline, StagesOfMixedLayersHoldAndPlanTheirOwnBlocks) {
  ModelConfig m = test::tiny(Family::DeepseekV3, AttentionImpl::Flash, 8);
  m.layer_pattern = {0, 0, 0, 1, 1, 1, 1, 1};  // stages of 2: dense, dense+experts, experts, experts
  m.validate();
  ParallelLayout p;
  p.pp = 4;
  p.micro_batches = 4;
  for (int stage = 0; stage < 4; ++stage) EXPECT_NO_THROW(stage_weight_runs(m, p, stage, 0)) << stage;
  const RankPrediction r = predict_ranks(
      m, p, [](const BlockGraph& g) { return test::plugins().plan(parse_policy_choice("none"), g); }, nullptr);
  ASSERT_EQ(r.stages.size(), 4u);
  // The middle stages have as many blocks but not the same ones: two plans, two walks.
  EXPECT_NE(r.stages[1].micro_batch, r.stages[2].micro_batch);
  EXPECT_EQ(r.stages[2].micro_batch, r.stages[3].micro_batch);
  const auto& mb1 = r.micro_batch[static_cast<std::size_t>(r.stages[1].micro_batch)];
  const auto& mb2 = r.micro_batch[static_cast<std::size_t>(r.stages[2].micro_batch)];
  EXPECT_LT(mb1.sim.static_bytes, mb2.sim.static_bytes) << "a micro-batch of a stage holds its own blocks' parameters";
  for (const StagePrediction& s : r.stages) {
    const Prediction w = simulate_stage(m, p, s.stage, r.micro_batch[static_cast<std::size_t>(s.micro_batch)].schedule, nullptr);
    EXPECT_EQ(s.peak_bytes, w.peak_bytes) << "stage " << s.stage;
    EXPECT_GE(s.peak_bytes, s.statics.total()) << "stage " << s.stage;
  }
}

}  // namespace
}  // namespace remat
