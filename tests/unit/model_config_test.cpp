// Bad model configs are refused before anything runs, naming the field and the value.
#include <gtest/gtest.h>

#include "core/graph/block_graph.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "core/model/model_config.h"
#include "core/model/model_source.h"
#include "core/util/error.h"

namespace remat {
namespace {

nlohmann::json good() {
  return {{"architecture", "gpt2"}, {"layers", 2}, {"hidden", 64}, {"heads", 4}, {"seq", 16},
          {"batch", 2}, {"vocab", 256}, {"dropout", 0.1}};
}

// The error names `field` and mentions `value`.
void expect_refused(const nlohmann::json& j, const std::string& field, const std::string& value) {
  try {
    model_from_json(j);
    FAIL() << "accepted " << j.dump();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), field) << e.what();
    EXPECT_NE(std::string(e.what()).find(value), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, AcceptsAGoodConfigWithDefaults) {
  ModelConfig m = model_from_json(good());
  EXPECT_EQ(m.ffn, 256);
  EXPECT_EQ(m.kv_heads, 4);
  EXPECT_EQ(m.dtype, DType::BF16);
  EXPECT_EQ(m.attention, AttentionImpl::Naive);
  ModelConfig back = model_from_json(model_to_json(m));
  EXPECT_EQ(model_to_json(back), model_to_json(m));
}

TEST(ModelConfig, RefusesBadFieldsByName) {
  auto j = good();
  j["hidden"] = 66;
  expect_refused(j, "hidden", "66");
  j = good();
  j["architecture"] = "llama";
  j["ffn"] = 128;
  j["heads"] = 4;
  j["kv_heads"] = 3;
  expect_refused(j, "kv_heads", "3");
  j = good();
  j["layers"] = 0;
  expect_refused(j, "layers", "0");
  j = good();
  j["batch"] = -2;
  expect_refused(j, "batch", "-2");
  j = good();
  j["dropout"] = 1.0;
  expect_refused(j, "dropout", "1.0");
  j = good();
  j["dropout"] = -0.1;
  expect_refused(j, "dropout", "-0.1");
  j = good();
  j["architecture"] = "mamba";
  expect_refused(j, "architecture", "mamba");
  j = good();
  j["attention"] = "sparse";
  expect_refused(j, "attention", "sparse");
  j = good();
  j["seq"] = 1 << 30;
  j["positions"] = 1 << 30;
  j["heads"] = 64;
  j["hidden"] = 4096;
  j["batch"] = 1024;
  expect_refused(j, "seq", "overflow");
  j = good();
  j["colour"] = "blue";
  expect_refused(j, "colour", "unknown");
  j = good();
  j["layers"] = "two";
  expect_refused(j, "layers", "two");
  j = good();
  j["architecture"] = "gpt2";
  j["kv_heads"] = 2;
  expect_refused(j, "kv_heads", "2");
}

TEST(ModelConfig, ImportsHuggingFaceConfigsAndRefusesWhatItDoesNotModel) {
  nlohmann::json gpt2 = {{"model_type", "gpt2"}, {"n_layer", 12}, {"n_embd", 768}, {"n_head", 12},
                         {"n_positions", 1024}, {"vocab_size", 50257}, {"resid_pdrop", 0.1},
                         {"embd_pdrop", 0.1}, {"attn_pdrop", 0.1}, {"activation_function", "gelu_new"},
                         {"layer_norm_epsilon", 1e-5}, {"architectures", {"GPT2LMHeadModel"}}};
  ModelConfig g = model_from_hf_json(gpt2, "gpt2");
  EXPECT_EQ(g.layers, 12);
  EXPECT_EQ(g.ffn, 3072);
  EXPECT_DOUBLE_EQ(g.dropout, 0.1);
  nlohmann::json llama = {{"model_type", "llama"}, {"hidden_size", 2048}, {"intermediate_size", 8192},
                          {"num_hidden_layers", 16}, {"num_attention_heads", 32},
                          {"num_key_value_heads", 8}, {"max_position_embeddings", 131072},
                          {"vocab_size", 128256}, {"rms_norm_eps", 1e-5}, {"rope_theta", 500000.0},
                          {"hidden_act", "silu"}, {"tie_word_embeddings", false}, {"rope_scaling", nullptr}};
  ModelConfig l = model_from_hf_json(llama, "llama");
  EXPECT_EQ(l.kv_heads, 8);
  EXPECT_DOUBLE_EQ(l.rope_theta, 500000.0);
  // Llama 3.2's rope_scaling is modelled; an incomplete one is refused by its field.
  llama["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  EXPECT_EQ(model_from_hf_json(llama, "llama").rope_scaling.type, RopeType::Llama3);
  llama["rope_scaling"].erase("original_max_position_embeddings");
  try {
    model_from_hf_json(llama, "llama");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "rope_scaling.original_max_position_embeddings");
  }
  llama["rope_scaling"] = nullptr;
  llama["sliding_window"] = 4096;
  try {
    model_from_hf_json(llama, "llama");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "sliding_window");
  }
}

// The exact GELU, GeGLU and QK-norm are run, so configs asking for them are accepted (ours and
// Hugging Face's) and their blocks hold the op.
TEST(ModelConfig, AcceptsTheExactGeluGegluAndQkNorm) {
  auto runs = [](const ModelConfig& m, OpKind op) {
    BlockGraph g(m);
    return std::any_of(g.steps().begin(), g.steps().end(), [&](const StepDef& s) { return s.op == op; });
  };
  auto j = good();
  j["mlp"] = "gelu";
  EXPECT_TRUE(runs(model_from_json(j), OpKind::GeluErf));
  j = good();
  j["architecture"] = "llama";
  j["ffn"] = 128;
  j["mlp"] = "geglu";
  EXPECT_TRUE(runs(model_from_json(j), OpKind::GeGlu));
  // gpt-oss's clamped SwiGLU and its limit (7 by default), kept through a round trip; a limit
  // for another activation, or one of 0, is refused by name.
  j["swiglu_limit"] = 5.5;
  EXPECT_THROW(model_from_json(j), ConfigError);
  j["mlp"] = "swiglu_clamped";
  EXPECT_TRUE(runs(model_from_json(j), OpKind::SwiGluClamped));
  EXPECT_EQ(model_from_json(model_to_json(model_from_json(j))).swiglu_limit, 5.5);
  j["swiglu_limit"] = 0;
  try {
    model_from_json(j);
    ADD_FAILURE() << "a limit of 0 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("swiglu_limit"), std::string::npos) << e.what();
  }
  j.erase("swiglu_limit");
  EXPECT_EQ(model_from_json(j).swiglu_limit, 7.0);
  j["mlp"] = "swiglu";
  j["qk_norm"] = true;  // as files before "head" wrote the projection-wide norm
  EXPECT_EQ(model_from_json(j).qk_norm, QkNormKind::Projection);
  EXPECT_TRUE(runs(model_from_json(j), OpKind::QkNorm));
  j["qk_norm"] = "head";
  EXPECT_TRUE(runs(model_from_json(j), OpKind::QkHeadNorm));
  EXPECT_EQ(model_to_json(model_from_json(j)).at("qk_norm"), "head");
  j["qk_norm"] = "heads";
  EXPECT_THROW(model_from_json(j), ConfigError);
  nlohmann::json gpt2 = {{"model_type", "gpt2"}, {"n_layer", 2}, {"n_embd", 64}, {"n_head", 4},
                         {"n_positions", 64}, {"vocab_size", 256}, {"activation_function", "gelu"}};
  ModelConfig g = model_from_hf_json(gpt2, "gpt2");
  EXPECT_EQ(g.mlp, MlpKind::Gelu);
  EXPECT_TRUE(runs(g, OpKind::GeluErf));
  nlohmann::json olmo2 = {{"model_type", "olmo2"}, {"hidden_size", 64}, {"intermediate_size", 128},
                          {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                          {"num_key_value_heads", 4}, {"max_position_embeddings", 64},
                          {"vocab_size", 256}, {"rms_norm_eps", 1e-6}, {"hidden_act", "silu"}};
  ModelConfig o = model_from_hf_json(olmo2, "olmo2");
  EXPECT_EQ(o.qk_norm, QkNormKind::Projection);
  EXPECT_TRUE(runs(o, OpKind::QkNorm));
}

// Gemma's (1 + w) norms and sqrt(hidden) embeddings are run: its config is accepted, and the
// embeddings' factor is sqrt(hidden) in the model's dtype (bf16: the bf16 value next to it).
TEST(ModelConfig, AcceptsGemmaAndScalesItsEmbeddingsInTheModelsDtype) {
  nlohmann::json gemma = {{"model_type", "gemma"}, {"hidden_size", 2048}, {"intermediate_size", 4096},
                          {"num_hidden_layers", 2}, {"num_attention_heads", 8},
                          {"num_key_value_heads", 1}, {"head_dim", 256},
                          {"max_position_embeddings", 64}, {"vocab_size", 256},
                          {"rms_norm_eps", 1e-6}, {"hidden_activation", "gelu_pytorch_tanh"}};
  ModelConfig g = model_from_hf_json(gemma, "gemma");
  EXPECT_TRUE(g.norm_unit_offset);
  EXPECT_TRUE(g.embed_scale);
  EXPECT_NO_THROW(g.validate());
  const float exact = std::sqrt(2048.0f);
  g.dtype = DType::F32;
  EXPECT_EQ(g.embed_multiplier(), exact);
  g.dtype = DType::BF16;
  const float b = g.embed_multiplier();
  std::uint32_t bits;
  std::memcpy(&bits, &b, sizeof bits);
  EXPECT_EQ(bits & 0xffffu, 0u) << "a bf16 value";
  EXPECT_NE(b, exact);
  EXPECT_LE(std::fabs(b - exact), exact / 256.0f);  // within half a bf16 step (8 bits of mantissa)
  g.embed_scale = false;
  EXPECT_EQ(g.embed_multiplier(), 1.0f);
}

TEST(ModelConfig, HuggingFaceImportReportsEveryProblemAtOnceAndListsWhatItIgnores) {
  // gpt2-medium's packaging fields are accepted and listed.
  nlohmann::json medium = {{"model_type", "gpt2"}, {"n_layer", 24}, {"n_embd", 1024}, {"n_head", 16},
                           {"n_positions", 1024}, {"vocab_size", 50257}, {"n_special", 0},
                           {"predict_special_tokens", true}, {"n_ctx", 1024}, {"scale_attn_weights", true}};
  ModelConfig m = model_from_hf_json(medium, "gpt2-medium");
  EXPECT_EQ(m.layers, 24);
  EXPECT_NE(std::find(m.ignored_fields.begin(), m.ignored_fields.end(), "n_special"), m.ignored_fields.end());
  EXPECT_NE(std::find(m.ignored_fields.begin(), m.ignored_fields.end(), "predict_special_tokens"),
            m.ignored_fields.end());
  EXPECT_EQ(std::find(m.ignored_fields.begin(), m.ignored_fields.end(), "scale_attn_weights"),
            m.ignored_fields.end());  // modelled, not ignored
  // GPT-2's attention flags are modelled: unscaled scores, the inverse-layer scale; the fp32
  // upcast is what the engine always does.
  nlohmann::json flags = medium;
  flags["scale_attn_weights"] = false;
  flags["scale_attn_by_inverse_layer_idx"] = true;
  flags["reorder_and_upcast_attn"] = true;
  ModelConfig f = model_from_hf_json(flags, "x");
  EXPECT_DOUBLE_EQ(f.score_scale(0), 1.0);
  EXPECT_DOUBLE_EQ(f.score_scale(3), 0.25);
  // Fields that change the arithmetic and are not modelled are refused, all of them in one message.
  nlohmann::json bad = medium;
  bad["activation_function"] = "relu";
  bad["resid_pdrop"] = 0.2;
  bad["attn_pdrop"] = 0.1;
  bad["sliding_window"] = 8;
  bad.erase("n_head");
  try {
    model_from_hf_json(bad, "x");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    const std::string w = e.what();
    for (const char* f : {"activation_function", "resid_pdrop", "sliding_window", "n_head"})
      EXPECT_NE(w.find(f), std::string::npos) << f << " missing from: " << w;
    EXPECT_NE(w.find("(4 problems)"), std::string::npos) << w;
  }
  // Llama's attention_dropout is applied to the attention probabilities only, as Hugging Face does.
  nlohmann::json llama = {{"model_type", "llama"}, {"hidden_size", 64}, {"intermediate_size", 128},
                          {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"max_position_embeddings", 64},
                          {"vocab_size", 100}, {"attention_dropout", 0.1}};
  ModelConfig l = model_from_hf_json(llama, "x");
  EXPECT_DOUBLE_EQ(l.dropout, 0.1);
  EXPECT_EQ(l.dropout_sites, static_cast<unsigned>(kDropAttention));
  EXPECT_TRUE(BlockGraph(l).find("attn.drop_mask").has_value());
  EXPECT_FALSE(BlockGraph(l).find("attn.res_mask").has_value());
  nlohmann::json other = {{"model_type", "mamba"}};
  try {
    model_from_hf_json(other, "x");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("known: gpt2, llama, mistral, qwen2, gemma, gemma2, phi3, olmo2"),
              std::string::npos) << e.what();
  }
}

TEST(ModelConfig, HuggingFaceFieldsOfTheWrongTypeAreRefusedByName) {
  nlohmann::json gpt2 = {{"model_type", "gpt2"}, {"n_layer", 2}, {"n_embd", 64}, {"n_head", 4},
                         {"n_positions", 32}, {"vocab_size", 256}};
  for (const auto& [field, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"activation_function", 7}, {"activation_function", nullptr}, {"tie_word_embeddings", "no"},
           {"tie_word_embeddings", 0}}) {
    nlohmann::json j = gpt2;
    j[field] = value;
    try {
      model_from_hf_json(j, "gpt2");
      ADD_FAILURE() << field << " = " << value.dump() << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
    }
  }
}

TEST(ModelConfig, RefusesUnreadableAndMalformedFiles) {
  EXPECT_THROW(load_model_file("/nonexistent/model.json"), Error);
  std::string path = ::testing::TempDir() + "/bad_model.json";
  std::ofstream(path) << "{\"architecture\": \"gpt2\", \"layers\": ";
  try {
    load_model_file(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos);
  }
  std::remove(path.c_str());
}

TEST(ModelConfig, PresetsResolveAndUnknownNamesAreListed) {
  ModelConfig t = resolve_model("tiny");
  EXPECT_EQ(t.name, "tiny");
  EXPECT_GT(t.dropout, 0.0);
  for (const char* p : {"small", "gpt2-124m", "gpt2-350m", "llama-tiny", "llama-1b"}) {
    ModelConfig m = resolve_model(p);
    EXPECT_NO_THROW(m.validate()) << p;
  }
  EXPECT_EQ(resolve_model("gpt2-124m").vocab, 50304);
  EXPECT_DOUBLE_EQ(resolve_model("gpt2-350m").dropout, 0.0);
  EXPECT_LT(resolve_model("llama-tiny").kv_heads, resolve_model("llama-tiny").heads);
  try {
    resolve_model("gpt5");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tiny"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// Parameter counts of the family presets, equal to the published models' (Hugging Face model
// cards): tied embeddings, head_dim, GQA, biases and fused names all count.
TEST(ModelConfig, FamilyPresetsHaveThePublishedParameterCounts) {
  const std::pair<const char*, std::int64_t> kPublished[] = {
      {"llama-3.2-1b", 1'235'814'400},  {"llama-3.1-8b", 8'030'261'248},
      {"mistral-7b", 7'241'732'096},    {"qwen2.5-0.5b", 494'032'768},
      {"phi-3-mini", 3'821'079'552},
      // Qwen3's model cards round them (8.2B, 6.95B without the embeddings; 0.6B, 0.44B): the
      // counts of the published checkpoints' tensors.
      {"qwen3-8b", 8'190'735'360},      {"qwen3-0.6b", 596'049'920},
      // Granite 3.1 8B: the count of its shapes (vocabulary 49,155); the published
      // granite-3.3-8b-instruct's 8,170,864,640 is four tokens' rows more (tests/data/hf-configs).
      {"granite-3.1-8b", 8'170'848'256},
      // Pythia's model card gives it exactly.
      {"pythia-1.4b", 1'414'647'808},   {"falcon-7b", 6'921'720'704},
      // Gemma 3 27B's language model (its model card counts the vision encoder too): as
      // llama.cpp's n_params of gemma-3-27b-it gives it.
      {"gemma-3-27b", 27'009'346'304},
      // SmolLM3 3B: the Hub's safetensors index (tests/data/hf-configs/README.md).
      {"smollm3-3b", 3'075'098'624},
      // Mixtures of experts, every expert counted: Mixtral 8x7B's 46.7B (Mistral AI's
      // announcement) and Qwen3-30B-A3B's 30.5B (model card), both rounded there.
      {"mixtral-8x7b", 46'702'792'704}, {"qwen3-30b-a3b", 30'532'122'624},
      // DeepSeek-V3's 671B (its model card: 671B main model, plus 14B of the multi-token-
      // prediction module the preset leaves out, as Hugging Face loads the model).
      {"deepseek-v3", 671'026'419'200},
      // gpt-oss-20b: 20.91B on OpenAI's model card; counted from its config.json's fields
      // (tests/data/hf-configs/README.md).
      {"gpt-oss-20b", 20'914'757'184},
      // Llama 4 Scout's text model: the Hub's 108,641,793,536 for the whole model less its vision
      // tower (tests/data/hf-configs/README.md).
      {"llama-4-scout", 107'769'861'120}};
  for (const auto& [name, count] : kPublished) {
    const ModelConfig m = resolve_model(name);
    EXPECT_EQ(ParamLayout(m).total(), count) << name;
  }
  // Untying Llama 3.2 1B adds the V·h head back.
  ModelConfig untied = resolve_model("llama-3.2-1b");
  untied.tied_embeddings = false;
  EXPECT_EQ(ParamLayout(untied).total(), 1'235'814'400 + 128'256ll * 2048);
}

nlohmann::json published_config(const char* file) {
  std::ifstream in(std::string(REMAT_TEST_DATA_DIR) + "/hf-configs/" + file);
  return nlohmann::json::parse(in);
}

// The refusal's message, or "" when `j` imports.
std::string published_refusal(const nlohmann::json& j) {
  try {
    model_from_hf_json(j, "x");
    return "";
  } catch (const ConfigError& e) {
    return e.what();
  }
}

TEST(ModelConfig, TransformersFiveLayoutMeansWhatTheFourLayoutMeans) {
  const nlohmann::json v4 = published_config("qwen2.5-0.5b.json");
  const ModelConfig a = model_from_hf_json(v4, "x");
  // As transformers 5 saves it: RoPE's base inside rope_parameters, every layer's kind, dtype.
  nlohmann::json v5 = v4;
  v5.erase("rope_theta");
  v5.erase("torch_dtype");
  v5["dtype"] = "bfloat16";
  v5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  v5["layer_types"] = std::vector<std::string>(24, "full_attention");
  const ModelConfig b = model_from_hf_json(v5, "x");
  EXPECT_EQ(b.rope_theta, 1000000.0);  // not the 10000 default
  EXPECT_EQ(b.rope_theta, a.rope_theta);
  EXPECT_EQ(ParamLayout(b).total(), ParamLayout(a).total());
  EXPECT_EQ(b.layers, a.layers);
  // One object per layer kind, the same for both: read as one.
  nlohmann::json kinds = v5;
  kinds["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1000000.0}}},
                              {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1000000.0}}}};
  EXPECT_EQ(model_from_hf_json(kinds, "x").rope_theta, 1000000.0);
  // A scaling type inside rope_parameters is rope_scaling.
  nlohmann::json yarn = v5;
  yarn["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1000000.0}, {"factor", 4.0},
                             {"original_max_position_embeddings", 32768}};
  yarn["max_position_embeddings"] = 131072;
  nlohmann::json yarn4 = v4;
  yarn4["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  yarn4["max_position_embeddings"] = 131072;
  EXPECT_EQ(model_from_hf_json(yarn, "x").rope_scaling, model_from_hf_json(yarn4, "x").rope_scaling);
  EXPECT_EQ(model_from_hf_json(yarn, "x").rope_scaling.type, RopeType::Yarn);
  // Gemma 2's alternation as layer_types.
  nlohmann::json gemma = published_config("gemma-2-9b.json");
  std::vector<std::string> alternate;
  for (int l = 0; l < 42; ++l) alternate.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
  gemma["layer_types"] = alternate;
  EXPECT_EQ(published_refusal(gemma), "");

  // What contradicts or is not modelled: refused by name, every problem in one message.
  nlohmann::json bad = v5;
  bad["rope_theta"] = 10000.0;  // against rope_parameters' 1e6
  bad["layer_types"] = std::vector<std::string>(23, "full_attention");
  std::string w = published_refusal(bad);
  EXPECT_NE(w.find("rope_theta 1000000.0 contradicts the top-level rope_theta 10000.0"), std::string::npos) << w;
  EXPECT_NE(w.find("lists 23 layers; num_hidden_layers is 24"), std::string::npos) << w;
  EXPECT_NE(w.find("(2 problems)"), std::string::npos) << w;
  nlohmann::json unknown = v5;
  unknown["layer_types"][3] = "chunked_attention";
  w = published_refusal(unknown);
  EXPECT_NE(w.find("layer 3 is \"chunked_attention\""), std::string::npos) << w;
  // Another pattern than the family's: layer kinds (every layer global here).
  gemma["layer_types"] = std::vector<std::string>(42, "full_attention");
  const ModelConfig all_full = model_from_hf_json(gemma, "g");
  ASSERT_EQ(all_full.layer_kinds.size(), 1u);
  EXPECT_EQ(all_full.layer_kinds[0].name, "full_attention");
  for (int l : {0, 1, 41}) EXPECT_EQ(all_full.window_of(l), 0) << l;
  EXPECT_EQ(model_from_json(model_to_json(all_full)).layer_pattern, all_full.layer_pattern);
  // A sliding layer needs a window.
  nlohmann::json no_window = v5;
  no_window["layer_types"][2] = "sliding_attention";
  w = published_refusal(no_window);
  EXPECT_NE(w.find("layer 2 is sliding_attention, but the config gives no window"), std::string::npos) << w;
  nlohmann::json per_kind = kinds;
  per_kind["rope_parameters"]["sliding_attention"]["rope_theta"] = 10000.0;
  w = published_refusal(per_kind);
  EXPECT_NE(w.find("a RoPE per layer kind"), std::string::npos) << w;
  // A family that is not modelled: the nearest one and what it lacks.
  nlohmann::json next = v4;
  next["model_type"] = "qwen3_next";
  w = published_refusal(next);
  EXPECT_NE(w.find("the nearest supported is qwen3_moe, without its gated DeltaNet"), std::string::npos) << w;
  EXPECT_NE(w.find("llama4_text"), std::string::npos) << w;  // among the known ones
}

// Granite's four multipliers: read from its config (the score scale is attention_multiplier,
// 1 when absent, never 1/sqrt(head_dim)), kept by our JSON, and refused where they make no sense.
TEST(ModelConfig, GraniteMultipliersAreReadKeptAndChecked) {
  nlohmann::json g = {{"model_type", "granite"}, {"hidden_size", 64}, {"intermediate_size", 128},
                      {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                      {"max_position_embeddings", 64}, {"vocab_size", 256}, {"rms_norm_eps", 1e-5},
                      {"hidden_act", "silu"}, {"embedding_multiplier", 12.0},
                      {"attention_multiplier", 0.0078125}, {"residual_multiplier", 0.22},
                      {"logits_scaling", 16.0}, {"tie_word_embeddings", true}};
  const ModelConfig m = model_from_hf_json(g, "granite");
  EXPECT_EQ(m.family, Family::Granite);
  EXPECT_EQ(m.attn_scale, 0.0078125);
  EXPECT_EQ(m.score_scale(1), 0.0078125);
  EXPECT_EQ(m.embed_multiplier(), 12.0f);
  EXPECT_EQ(m.residual_multiplier, 0.22);
  EXPECT_EQ(m.logits_scaling, 16.0);
  const ModelConfig back = model_from_json(model_to_json(m));
  EXPECT_EQ(back.residual_multiplier, 0.22);
  EXPECT_EQ(back.logits_scaling, 16.0);
  EXPECT_EQ(back.embedding_multiplier, 12.0);
  nlohmann::json plain = g;
  plain.erase("attention_multiplier");
  EXPECT_EQ(model_from_hf_json(plain, "g").score_scale(0), 1.0);
  nlohmann::json bad = model_to_json(m);
  bad["logits_scaling"] = 0.0;
  EXPECT_THROW(model_from_json(bad), ConfigError);
  bad = model_to_json(m);
  bad["embed_scale"] = true;
  try {
    model_from_json(bad);
    FAIL() << "embed_scale with an embedding_multiplier accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "embedding_multiplier");
  }
}

// GPT-NeoX (Pythia 1.4B's sizes): a quarter of each head rotated, the parallel block, exact GELU,
// biases and LayerNorm biases, an untied head; use_parallel_residual false is the sequential
// block; contradicting RoPE fields and unmodelled activations are refused by name, together.
TEST(ModelConfig, GptNeoxImportsItsRotaryShareAndParallelBlock) {
  nlohmann::json j = {{"model_type", "gpt_neox"}, {"architectures", {"GPTNeoXForCausalLM"}},
                      {"hidden_size", 2048}, {"intermediate_size", 8192}, {"num_hidden_layers", 24},
                      {"num_attention_heads", 16}, {"vocab_size", 50304}, {"max_position_embeddings", 2048},
                      {"rotary_pct", 0.25}, {"rotary_emb_base", 10000}, {"layer_norm_eps", 1e-5},
                      {"hidden_act", "gelu"}, {"use_parallel_residual", true}, {"tie_word_embeddings", false},
                      {"classifier_dropout", 0.1}, {"torch_dtype", "float16"}};
  const ModelConfig m = model_from_hf_json(j, "pythia");
  EXPECT_EQ(m.family, Family::GptNeox);
  EXPECT_EQ(m.rotary_dim(), 32);
  EXPECT_EQ(m.block_layout, BlockLayout::Parallel);
  EXPECT_EQ(m.mlp, MlpKind::Gelu);
  EXPECT_EQ(m.norm, NormKind::LayerNorm);
  EXPECT_EQ(ParamLayout(m).total(), ParamLayout(resolve_model("pythia-1.4b")).total());
  const ParamLayout layout(m);
  const ParamSpec* qkv = layout.find("gpt_neox.layers.3.attention.query_key_value.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->hf_qkv.groups, 16);
  j["use_parallel_residual"] = false;
  EXPECT_EQ(model_from_hf_json(j, "x").block_layout, BlockLayout::Sequential);
  j["partial_rotary_factor"] = 0.5;
  j["rope_theta"] = 500.0;
  j["hidden_act"] = "relu";
  try {
    model_from_hf_json(j, "x");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    const std::string w = e.what();
    for (const char* k : {"partial_rotary_factor", "rope_theta", "hidden_act", "(3 problems)"})
      EXPECT_NE(w.find(k), std::string::npos) << k << " missing from: " << w;
  }
}

// Hugging Face's per-head q|k|v rows and ours: every row lands once, each head where it belongs.
TEST(ModelConfig, GroupedQkvRowsRoundTrip) {
  ParamSpec p;
  p.rows = 2 * 3 * 2 + 2 * 2 * 2;  // groups 2, rep 3 (six q heads), d 2: q 12 rows, k 4, v 4
  p.cols = 1;
  p.hf_qkv = {2, 3, 2};
  std::vector<float> ours(20), hf(20), back(20);
  for (int i = 0; i < 20; ++i) ours[static_cast<std::size_t>(i)] = static_cast<float>(i);
  qkv_rows_to_hf(p, ours.data(), hf.data());
  // Group 0: q heads 0-2 (rows 0-5), k head 0 (rows 12-13), v head 0 (rows 16-17); then group 1.
  const std::vector<float> want = {0, 1, 2, 3, 4, 5, 12, 13, 16, 17, 6, 7, 8, 9, 10, 11, 14, 15, 18, 19};
  EXPECT_EQ(hf, want);
  qkv_rows_from_hf(p, hf.data(), back.data());
  EXPECT_EQ(back, ours);
}

// Falcon's three layouts from its flags: the 7B's multi-query attention with one shared norm, the
// new decoder architecture's kv groups with a norm per branch (also under RefinedWeb's first
// names), a sequential block without parallel_attn; ALiBi and the post-norm residual refused.
TEST(ModelConfig, FalconLayoutsFollowItsFlags) {
  nlohmann::json seven = {{"model_type", "falcon"}, {"hidden_size", 4544}, {"num_hidden_layers", 32},
                          {"num_attention_heads", 71}, {"vocab_size", 65024}, {"multi_query", true},
                          {"parallel_attn", true}, {"bias", false}, {"alibi", false},
                          {"new_decoder_architecture", false}, {"layer_norm_epsilon", 1e-5}};
  const ModelConfig m = model_from_hf_json(seven, "falcon-7b");
  EXPECT_EQ(m.kv_heads, 1);
  EXPECT_EQ(m.block_layout, BlockLayout::ParallelSharedNorm);
  EXPECT_EQ(m.ffn, 4 * 4544);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_EQ(ParamLayout(m).total(), ParamLayout(resolve_model("falcon-7b")).total());
  EXPECT_EQ(ParamLayout(m).total(), 6'921'720'704);  // Falcon 7B's published count
  const ParamLayout seven_layout(m);
  EXPECT_EQ(seven_layout.find("transformer.h.0.post_attention_layernorm.weight"), nullptr);  // one shared norm
  nlohmann::json forty = {{"model_type", "RefinedWeb"}, {"hidden_size", 256}, {"n_layer", 2}, {"n_head", 8},
                          {"n_head_kv", 2}, {"vocab_size", 512}, {"parallel_attn", true}, {"bias", false}};
  const ModelConfig g = model_from_hf_json(forty, "rw");
  EXPECT_EQ(g.kv_heads, 2);
  EXPECT_EQ(g.block_layout, BlockLayout::Parallel);
  const ParamLayout L(g);
  ASSERT_NE(L.find("transformer.h.1.ln_mlp.bias"), nullptr);
  EXPECT_EQ(L.find("transformer.h.1.self_attention.query_key_value.weight")->hf_qkv.groups, 2);
  nlohmann::json seq = seven;
  seq["parallel_attn"] = false;
  EXPECT_EQ(model_from_hf_json(seq, "x").block_layout, BlockLayout::Sequential);
  seven["alibi"] = true;
  seven["apply_residual_connection_post_layernorm"] = true;
  seven["num_kv_heads"] = 8;
  try {
    model_from_hf_json(seven, "x");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    const std::string w = e.what();
    for (const char* k : {"alibi", "apply_residual_connection_post_layernorm", "num_kv_heads", "(3 problems)"})
      EXPECT_NE(w.find(k), std::string::npos) << k << " missing from: " << w;
  }
}

// Qwen's window (use_sliding_window true) is on the layers from max_window_layers on, as
// transformers' layer_types has it: every layer from 0, none past the last (28 by default).
TEST(ModelConfig, QwenWindowsTheLayersFromMaxWindowLayersOn) {
  nlohmann::json q = {{"model_type", "qwen2"}, {"hidden_size", 64}, {"intermediate_size", 128},
                      {"num_hidden_layers", 4}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                      {"max_position_embeddings", 64}, {"vocab_size", 256}, {"use_sliding_window", true},
                      {"sliding_window", 16}, {"max_window_layers", 2}};
  const ModelConfig two = model_from_hf_json(q, "q");
  for (int l = 0; l < 4; ++l) EXPECT_EQ(two.window_of(l), l >= 2 ? 16 : 0) << l;
  q["max_window_layers"] = 4;
  const ModelConfig none = model_from_hf_json(q, "q");
  for (int l = 0; l < 4; ++l) EXPECT_EQ(none.window_of(l), 0) << l;
  q.erase("max_window_layers");
  EXPECT_EQ(model_from_hf_json(q, "q").window_of(3), 0);  // transformers' default, 28
  q["max_window_layers"] = 2;
  q["layer_types"] = {"sliding_attention", "full_attention", "full_attention", "full_attention"};
  const ModelConfig listed = model_from_hf_json(q, "q");  // the list, not max_window_layers
  EXPECT_EQ(listed.window_of(0), 16);
  EXPECT_EQ(listed.window_of(2), 0);
  EXPECT_NE(std::find(listed.ignored_fields.begin(), listed.ignored_fields.end(), "max_window_layers"),
            listed.ignored_fields.end());
}

// Gemma 3 as transformers 5 saves it: a RoPE per layer kind (the windowed kind plain on its own
// base) and layer_types alone giving the pattern; the same model as the 4.x fields, and a
// layer_types against the pattern refused.
TEST(ModelConfig, GemmaThreeRopePerKindAndItsLayerPattern) {
  nlohmann::json v4 = {{"model_type", "gemma3_text"}, {"hidden_size", 64}, {"intermediate_size", 128},
                       {"num_hidden_layers", 12}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                       {"head_dim", 32}, {"max_position_embeddings", 4096}, {"vocab_size", 256},
                       {"rms_norm_eps", 1e-6}, {"hidden_activation", "gelu_pytorch_tanh"},
                       {"query_pre_attn_scalar", 32}, {"sliding_window", 16}, {"sliding_window_pattern", 6},
                       {"rope_theta", 1000000.0}, {"rope_local_base_freq", 10000.0},
                       {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}},
                       {"attn_logit_softcapping", nullptr}, {"final_logit_softcapping", nullptr}};
  const ModelConfig a = model_from_hf_json(v4, "g3");
  EXPECT_EQ(a.family, Family::Gemma3);
  EXPECT_EQ(a.qk_norm, QkNormKind::Head);
  EXPECT_EQ(a.window_of(4), 16);
  EXPECT_EQ(a.window_of(5), 0);  // every sixth layer global
  EXPECT_EQ(a.rope_local_theta, 10000.0);
  nlohmann::json v5 = v4;
  for (const char* k : {"sliding_window_pattern", "rope_scaling", "rope_local_base_freq"}) v5.erase(k);
  v5["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}}},
                           {"sliding_attention", {{"rope_type", "default"}}}};
  std::vector<std::string> kinds(12, "sliding_attention");
  kinds[5] = kinds[11] = "full_attention";
  v5["layer_types"] = kinds;
  const ModelConfig b = model_from_hf_json(v5, "g3");
  EXPECT_EQ(b.window_pattern, 6);
  EXPECT_EQ(b.rope_local_theta, 10000.0);
  EXPECT_EQ(b.rope_scaling, a.rope_scaling);
  EXPECT_EQ(model_to_json(b), model_to_json(a));
  // Another pattern: layer kinds, the windowed one on the local base without scaling.
  kinds[8] = "full_attention";
  v5["layer_types"] = kinds;
  const ModelConfig c = model_from_hf_json(v5, "g3");
  ASSERT_EQ(c.layer_kinds.size(), 2u);
  EXPECT_EQ(c.sliding_window, 0);
  for (int l = 0; l < 12; ++l) {
    const bool global = l == 5 || l == 8 || l == 11;
    EXPECT_EQ(c.window_of(l), global ? 0 : 16) << l;
    EXPECT_EQ(c.rope_base_of(l), global ? 0.0 : 10000.0) << l;
  }
  const nlohmann::json ours = model_to_json(c);
  EXPECT_FALSE(ours.contains("sliding_window_pattern"));
  EXPECT_EQ(ours.at("layer_pattern")[8], "full_attention");
  const ModelConfig back = model_from_json(ours);
  EXPECT_EQ(back.layer_kinds, c.layer_kinds);
  EXPECT_EQ(back.layer_pattern, c.layer_pattern);
  EXPECT_EQ(model_to_json(back), ours);
  // A family without a local base refuses a RoPE per kind.
  nlohmann::json qwen = {{"model_type", "qwen2"}, {"hidden_size", 64}, {"intermediate_size", 128},
                         {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"max_position_embeddings", 64},
                         {"vocab_size", 256}, {"rope_parameters", v5.at("rope_parameters")}};
  try {
    model_from_hf_json(qwen, "x");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("a RoPE per layer kind"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace remat
