// gpt-oss (Family::GptOss): its config.json read with GptOssConfig's defaults and refusals, the
// preset as the published file, its parameters (sinks, the router's bias, every expert's
// projections stacked in one Hugging Face tensor each, gate|up interleaved) and their place in
// the block's steps.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/graph/block_graph.h"
#include "core/io/safetensors.h"
#include "core/model/model_config.h"
#include "core/model/model_source.h"
#include "core/model/param_layout.h"
#include "core/util/error.h"
#include "hf_test_util.h"

namespace remat {
namespace {

nlohmann::json oss_published() { return hftest::published("gpt-oss-20b.json"); }

std::string oss_refusal(const nlohmann::json& j) { return hftest::refusal(j); }

// A config of small sizes; every other field takes GptOssConfig's default.
nlohmann::json oss_bare() {
  return {{"model_type", "gpt_oss"}, {"hidden_size", 64},        {"intermediate_size", 48},
          {"num_hidden_layers", 4},  {"num_attention_heads", 16}, {"vocab_size", 128},
          {"max_position_embeddings", 8192}};
}

TEST(GptOss, ThePublishedConfigIsThePresetAtItsOwnLength) {
  ModelConfig file = model_from_hf_json(oss_published(), "gpt-oss-20b");
  EXPECT_EQ(file.family, Family::GptOss);
  EXPECT_TRUE(file.attn_sinks && file.qkv_bias && file.out_bias && !file.tied_embeddings);
  EXPECT_EQ(file.mlp, MlpKind::SwiGluClamped);
  EXPECT_EQ(file.swiglu_limit, 7.0);
  EXPECT_TRUE(file.moe.router_bias && file.moe.expert_bias && file.moe.norm_topk);
  EXPECT_EQ(file.moe.experts, 32);
  EXPECT_EQ(file.moe.top_k, 4);
  EXPECT_EQ(file.rope_scaling.type, RopeType::Yarn);
  // layer_types as published (sliding first, alternating) is the family's own layout: no kinds.
  EXPECT_TRUE(file.layer_kinds.empty());
  for (int l : {0, 2, 22}) EXPECT_EQ(file.window_of(l), 128) << l;
  for (int l : {1, 3, 23}) EXPECT_EQ(file.window_of(l), 0) << l;
  const ModelConfig preset = resolve_model("gpt-oss-20b");
  EXPECT_EQ(hftest::at_preset_settings(file, preset), model_to_json(preset));
  EXPECT_EQ(ParamLayout(preset).total(), 20'914'757'184);
}

TEST(GptOss, AbsentFieldsTakeGptOssConfigsDefaults) {
  const ModelConfig m = model_from_hf_json(oss_bare(), "bare");
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.head_dim(), 64);  // not hidden / heads = 4
  EXPECT_EQ(m.norm_eps, 1e-5);
  EXPECT_EQ(m.rope_theta, 150000.0);
  EXPECT_EQ(m.rope_scaling.type, RopeType::Yarn);
  EXPECT_EQ(m.rope_scaling.factor.value_or(0.0), 32.0);
  EXPECT_FALSE(m.rope_scaling.truncate);
  EXPECT_EQ(m.moe.experts, 128);
  EXPECT_EQ(m.moe.top_k, 4);
  EXPECT_EQ(m.moe.ffn, 48);
  EXPECT_TRUE(m.qkv_bias && m.attn_sinks);
  EXPECT_EQ(m.window_of(0), 128);
  EXPECT_EQ(m.window_of(1), 0);
  // rope_scaling null: plain RoPE; transformers 5's rope_parameters with its own base.
  nlohmann::json plain = oss_bare();
  plain["rope_scaling"] = nullptr;
  EXPECT_EQ(model_from_hf_json(plain, "p").rope_scaling.type, RopeType::Default);
  nlohmann::json five = oss_bare();
  five["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 20000.0}};
  const ModelConfig f = model_from_hf_json(five, "f");
  EXPECT_EQ(f.rope_scaling.type, RopeType::Default);
  EXPECT_EQ(f.rope_theta, 20000.0);
  // rope_parameters null is transformers 5's default: YaRN.
  nlohmann::json null_five = oss_bare();
  null_five["rope_parameters"] = nullptr;
  EXPECT_EQ(model_from_hf_json(null_five, "n").rope_scaling.type, RopeType::Yarn);
  // No sizes at all: GptOssConfig's own (gpt-oss-120b's shape); num_experts names the experts too.
  nlohmann::json bare = {{"model_type", "gpt_oss"}, {"num_experts", 16}};
  const ModelConfig d = model_from_hf_json(bare, "d");
  EXPECT_EQ(d.layers, 36);
  EXPECT_EQ(d.hidden, 2880);
  EXPECT_EQ(d.vocab, 201088);
  EXPECT_EQ(d.moe.experts, 16);
  EXPECT_EQ(d.moe.ffn, 2880);
  // A layer list other than the default alternation becomes layer kinds.
  nlohmann::json types = oss_bare();
  types["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention", "full_attention"};
  const ModelConfig t = model_from_hf_json(types, "t");
  EXPECT_EQ(t.window_of(0), 0);
  EXPECT_EQ(t.window_of(1), 128);
  EXPECT_EQ(t.window_of(2), 128);
  EXPECT_TRUE(t.moe_in(0) && t.moe_in(3));
}

TEST(GptOss, FieldsItDoesNotModelAreRefusedByName) {
  nlohmann::json j = oss_published();
  j["swiglu_alpha"] = 1.5;
  std::string w = oss_refusal(j);
  EXPECT_NE(w.find("swiglu_alpha"), std::string::npos) << w;
  EXPECT_NE(w.find("1.702"), std::string::npos) << w;
  // The load-balancing loss at the published coefficient; without one it is refused.
  j = oss_published();
  j["output_router_logits"] = true;
  EXPECT_EQ(model_from_hf_json(j, "x").moe.aux_loss_coef, 0.9);
  j.erase("router_aux_loss_coef");
  w = oss_refusal(j);
  EXPECT_NE(w.find("router_aux_loss_coef: output_router_logits adds the load-balancing loss"), std::string::npos) << w;
  j = oss_published();
  j["experts_per_token"] = 2;
  w = oss_refusal(j);
  EXPECT_NE(w.find("experts_per_token"), std::string::npos) << w;
  j = oss_published();
  j["num_experts_per_tok"] = 40;
  j.erase("experts_per_token");
  w = oss_refusal(j);
  EXPECT_NE(w.find("num_experts_per_tok: 40 is more than the 32 experts"), std::string::npos) << w;
  // A bad count is refused once, not compared with the other as if it were 1.
  j = oss_published();
  j["num_local_experts"] = 0;
  w = oss_refusal(j);
  EXPECT_NE(w.find("num_local_experts"), std::string::npos) << w;
  EXPECT_EQ(w.find("is more than"), std::string::npos) << w;
  j = oss_published();
  j["swiglu_limit"] = nullptr;
  EXPECT_NE(oss_refusal(j).find("swiglu_limit: must be a number, got null"), std::string::npos) << oss_refusal(j);
  j = oss_published();
  j["swiglu_limit"] = -1.0;
  EXPECT_NE(oss_refusal(j).find("swiglu_limit"), std::string::npos) << oss_refusal(j);
}

ModelConfig oss_tiny() {
  ModelConfig m = model_from_hf_json(oss_bare(), "tiny");
  m.layers = 2;
  m.moe.experts = 3;
  m.moe.top_k = 2;
  m.seq = 8;
  m.batch = 1;
  m.validate();
  return m;
}

// Our layout holds expert e's rows [gate | up] of [2I, h]; the file holds gate_up_proj[e] as
// [h, 2I] with gate column 2i and up column 2i + 1; down_proj[e] as [I, h]; the biases [E, 2I]
// and [E, h] in the same column orders. Written and read back, every value returns.
TEST(GptOss, EveryExpertsProjectionsAreOneStackedTensorGateAndUpInterleaved) {
  const ModelConfig m = oss_tiny();
  const ParamLayout L(m);
  std::vector<float> flat(static_cast<std::size_t>(L.total()));
  for (std::size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<float>(i % 9973) * 0.5f;
  const std::int64_t E = 3, I = 48, h = 64;
  std::map<std::string, SafeTensor> file;
  for (auto& [name, t] : hf_tensors(flat, L)) file.emplace(name, std::move(t));
  const std::string p = "model.layers.1.";
  const SafeTensor& gu = file.at(p + "mlp.experts.gate_up_proj");
  EXPECT_EQ(gu.shape, (std::vector<std::int64_t>{E, h, 2 * I}));
  EXPECT_EQ(file.at(p + "mlp.experts.gate_up_proj_bias").shape, (std::vector<std::int64_t>{E, 2 * I}));
  EXPECT_EQ(file.at(p + "mlp.experts.down_proj").shape, (std::vector<std::int64_t>{E, I, h}));
  EXPECT_EQ(file.at(p + "mlp.experts.down_proj_bias").shape, (std::vector<std::int64_t>{E, h}));
  EXPECT_EQ(file.at(p + "mlp.router.bias").shape, (std::vector<std::int64_t>{E}));
  EXPECT_EQ(file.at(p + "self_attn.sinks").shape, (std::vector<std::int64_t>{16}));
  const float* fc = flat.data() + L.offset(1, "mlp.experts.fc.w");
  const float* down = flat.data() + L.offset(1, "mlp.experts.fc2.w");
  for (std::int64_t e : {0, 2})
    for (std::int64_t i : {std::int64_t{0}, std::int64_t{5}, I - 1})
      for (std::int64_t c : {std::int64_t{0}, std::int64_t{7}, h - 1}) {
        const std::int64_t at = (e * h + c) * 2 * I;
        EXPECT_EQ(gu.values[static_cast<std::size_t>(at + 2 * i)], fc[(e * 2 * I + i) * h + c]) << e << " gate " << i;
        EXPECT_EQ(gu.values[static_cast<std::size_t>(at + 2 * i + 1)], fc[(e * 2 * I + I + i) * h + c]) << e << " up " << i;
        EXPECT_EQ(file.at(p + "mlp.experts.down_proj").values[static_cast<std::size_t>((e * I + i) * h + c)],
                  down[(e * h + c) * I + i]);
      }
  const float* fcb = flat.data() + L.offset(1, "mlp.experts.fc.b");
  EXPECT_EQ(file.at(p + "mlp.experts.gate_up_proj_bias").values[static_cast<std::size_t>(2 * I + 3)], fcb[2 * I + I + 1]);
  EXPECT_EQ(flat_from_hf(file, L, m.family, "x.safetensors"), flat);
  // A stacked tensor of the wrong shape is refused with both shapes.
  file.at(p + "mlp.experts.down_proj").shape = {E, h, I};
  try {
    flat_from_hf(file, L, m.family, "x.safetensors");
    ADD_FAILURE() << "a transposed down_proj was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has shape 3x64x48, expected 3x48x64"), std::string::npos) << e.what();
  }
}

// The sinks are the attention op's parameter, split with the heads; the router adds its bias.
TEST(GptOss, SinksAndTheRoutersBiasAreTheirStepsParameters) {
  for (AttentionImpl impl : {AttentionImpl::Naive, AttentionImpl::Flash}) {
    ModelConfig m = oss_tiny();
    m.attention = impl;
    const BlockGraph g(m);
    int sinks = 0, router_bias = 0;
    for (const StepDef& s : g.steps()) {
      if (s.w == "attn.sinks") {
        ++sinks;
        EXPECT_TRUE(s.op == OpKind::AttnSoftmax || s.op == OpKind::FlashAttn) << s.name;
      }
      if (s.name == "moe.router" && s.b == "mlp.router.b") ++router_bias;
    }
    EXPECT_EQ(sinks, 1);
    EXPECT_EQ(router_bias, 1);
    m.attn_sinks = false;
    m.moe.router_bias = false;
    const BlockGraph without(m);  // named: a temporary's steps() would dangle in the loop
    for (const StepDef& s : without.steps()) {
      EXPECT_NE(s.w, "attn.sinks");
      if (s.name == "moe.router") EXPECT_TRUE(s.b.empty());
    }
    // One sink per head and an E-wide bias in every block, in the layout's count.
    EXPECT_EQ(ParamLayout(oss_tiny()).total() - ParamLayout(m).total(), 2 * (16 + 3));
  }
  // Our model JSON keeps both.
  ModelConfig m = oss_tiny();
  m.attn_sinks = false;
  const ModelConfig back = model_from_json(model_to_json(m));
  EXPECT_FALSE(back.attn_sinks);
  EXPECT_TRUE(back.moe.router_bias);
  nlohmann::json j = model_to_json(oss_tiny());
  j["architecture"] = "qwen3_moe";
  j["mlp"] = "swiglu_clamped";
  j["attn_sinks"] = true;
  EXPECT_TRUE(model_from_json(j).attn_sinks);
}

}  // namespace
}  // namespace remat
