// Published Hugging Face config.json files (tests/data/hf-configs, sources in its README), taken as
// they are: each one's parameter count, computed here from the file's own fields, is the published
// count, and each either imports (listing the fields it ignores) or is refused in words that say why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "core/model/model_config.h"
#include "core/model/param_layout.h"
#include "core/util/error.h"

namespace remat {
namespace {

std::string hf_file_path(const std::string& file) {
  return std::string(REMAT_TEST_DATA_DIR) + "/hf-configs/" + file;
}

nlohmann::json hf_file_json(const std::string& file) {
  std::ifstream in(hf_file_path(file));
  return nlohmann::json::parse(in);
}

std::int64_t hf_int(const nlohmann::json& j, const char* key, std::int64_t fallback) {
  return j.contains(key) && j.at(key).is_number_integer() ? j.at(key).get<std::int64_t>() : fallback;
}

bool hf_flag(const nlohmann::json& j, const char* key, bool fallback) {
  return j.contains(key) && j.at(key).is_boolean() ? j.at(key).get<bool>() : fallback;
}

// GPT-2: token and position tables, per block two LayerNorms (weight and bias), the fused qkv and
// the output projection with biases, the 4h MLP with biases; a final LayerNorm; the head tied.
std::int64_t gpt2_params(const nlohmann::json& j) {
  const std::int64_t h = j.at("n_embd"), L = j.at("n_layer"), V = j.at("vocab_size"), P = j.at("n_positions");
  const std::int64_t f = hf_int(j, "n_inner", 4 * h);
  const std::int64_t block = 2 * 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * f + f) + (f * h + h);
  return V * h + P * h + L * block + 2 * h;
}

// Falcon (RefinedWeb, RefinedWebModel, falcon): fused qkv of num_kv_heads key/value groups (one for
// multi-query), dense out, a 4h MLP, biases only with `bias`; one LayerNorm per block, or two
// (ln_attn, ln_mlp) in the new decoder architecture; a final LayerNorm; the head tied.
std::int64_t falcon_params(const nlohmann::json& j) {
  const std::string type = j.at("model_type");
  const std::int64_t h = j.at("hidden_size"), V = j.at("vocab_size");
  const std::int64_t L = hf_int(j, "num_hidden_layers", hf_int(j, "n_layer", 0));
  const std::int64_t H = hf_int(j, "num_attention_heads", hf_int(j, "n_head", 0));
  const bool new_arch = type == "RefinedWeb" || hf_flag(j, "new_decoder_architecture", false);
  const std::int64_t kv = new_arch ? hf_int(j, "num_kv_heads", hf_int(j, "n_head_kv", H))
                                   : (hf_flag(j, "multi_query", true) ? 1 : H);
  const std::int64_t d = h / H, b = hf_flag(j, "bias", false) ? 1 : 0;
  const std::int64_t qkv = (H + 2 * kv) * d;
  const std::int64_t block = (new_arch ? 2 : 1) * 2 * h + h * qkv + b * qkv + h * h + b * h +
                             h * 4 * h + b * 4 * h + 4 * h * h + b * h;
  return V * h + L * block + 2 * h;
}

// The Llama-like families: the token table (and an untied head), per block q/k/v/o of head_dim
// with grouped K/V, biases (Qwen2's on q/k/v; attention_bias on all four; mlp_bias), the gated MLP,
// per-head QK-norm (Qwen3, Gemma 3) or full-width (OLMo 2), RMSNorms (two, Gemma 2 and 3 four),
// and the final norm. Gemma and SmolLM3 tie the head unless the file says otherwise.
std::int64_t decoder_params(const nlohmann::json& j) {
  const std::string type = j.at("model_type");
  const std::int64_t h = j.at("hidden_size"), L = j.at("num_hidden_layers"), V = j.at("vocab_size");
  const std::int64_t f = j.at("intermediate_size"), H = j.at("num_attention_heads");
  const std::int64_t kv = hf_int(j, "num_key_value_heads", H), d = hf_int(j, "head_dim", h / H);
  const bool gemma = type == "gemma" || type == "gemma2" || type == "gemma3_text";
  const bool tied = hf_flag(j, "tie_word_embeddings", gemma || type == "smollm3");
  std::int64_t block = h * H * d + 2 * h * kv * d + H * d * h + 3 * h * f;
  // Mixtures of experts (every layer sparse in these files): each expert's gate, up and down of
  // its width (Mixtral: intermediate_size; Qwen3-MoE: moe_intermediate_size) and the router.
  if (type == "mixtral" || type == "qwen3_moe" || type == "qwen2_moe") {
    const std::int64_t E = j.at(type == "mixtral" ? "num_local_experts" : "num_experts");
    const std::int64_t fe = type == "mixtral" ? f : static_cast<std::int64_t>(j.at("moe_intermediate_size"));
    block += E * 3 * h * fe + E * h - 3 * h * f;
    if (type == "qwen2_moe") {  // the shared expert and its one-row gate
      const std::int64_t fs = j.at("shared_expert_intermediate_size");
      block += 3 * h * fs + h;
    }
  }
  if (type == "qwen2" || type == "qwen2_moe") block += H * d + 2 * kv * d;
  if (hf_flag(j, "attention_bias", false)) block += H * d + 2 * kv * d + h;
  if (hf_flag(j, "mlp_bias", false)) block += 2 * f + h;
  if (type == "qwen3" || type == "qwen3_moe" || type == "gemma3_text") block += 2 * d;
  if (type == "olmo2") block += H * d + kv * d;
  block += (type == "gemma2" || type == "gemma3_text" ? 4 : 2) * h;
  return V * h * (tied ? 1 : 2) + L * block + h;
}

// DeepSeek-V2 and V3: latent attention (q through q_lora_rank and its norm, or one q_proj; the
// keys' and values' down projection with the shared rotated part, the latent's norm, the up
// projection; o_proj from the value heads), the first first_k_dense_replace layers dense (and any
// l % moe_layer_freq != 0), the others n_routed_experts experts, n_shared_experts always on, the
// router and (V3's noaux_tc) its selection bias; two norms per layer, the final norm, an untied
// head. The multi-token-prediction layer is not part of the model.
std::int64_t deepseek_params(const nlohmann::json& j) {
  const std::int64_t h = j.at("hidden_size"), L = j.at("num_hidden_layers"), V = j.at("vocab_size");
  const std::int64_t H = j.at("num_attention_heads"), nope = j.at("qk_nope_head_dim"), rope = j.at("qk_rope_head_dim");
  const std::int64_t vd = j.at("v_head_dim"), kr = j.at("kv_lora_rank"), qr = hf_int(j, "q_lora_rank", 0);
  const std::int64_t attn = (qr > 0 ? h * qr + qr + qr * H * (nope + rope) : h * H * (nope + rope)) + h * (kr + rope) + kr +
                            kr * H * (nope + vd) + H * vd * h;
  const std::int64_t E = j.at("n_routed_experts"), fe = j.at("moe_intermediate_size");
  const std::int64_t moe = E * 3 * h * fe + 3 * h * fe * hf_int(j, "n_shared_experts", 0) + E * h +
                           (j.value("topk_method", "") == "noaux_tc" ? E : 0);
  const std::int64_t dense = 3 * h * static_cast<std::int64_t>(j.at("intermediate_size"));
  const std::int64_t first = hf_int(j, "first_k_dense_replace", 0), freq = hf_int(j, "moe_layer_freq", 1);
  std::int64_t total = 2 * V * h + h;
  for (std::int64_t l = 0; l < L; ++l) total += attn + 2 * h + (l >= first && l % freq == 0 ? moe : dense);
  return total;
}

// gpt-oss: per layer q, k, v and o with their biases (attention_bias), one sink logit per head,
// a router with its bias, num_local_experts experts of a fused gate_up [h, 2 I] and down [I, h],
// each with its bias; two norms per layer, the final norm, the embedding and an untied head.
std::int64_t gpt_oss_params(const nlohmann::json& j) {
  const std::int64_t h = j.at("hidden_size"), L = j.at("num_hidden_layers"), V = j.at("vocab_size");
  const std::int64_t H = j.at("num_attention_heads"), KV = j.at("num_key_value_heads"), d = j.at("head_dim");
  const std::int64_t E = j.at("num_local_experts"), I = j.at("intermediate_size");
  const std::int64_t b = j.value("attention_bias", true) ? 1 : 0;
  const std::int64_t attn = (h + b) * H * d + 2 * (h + b) * KV * d + H * d * h + b * h + H;
  const std::int64_t moe = (h + 1) * E + E * ((h + 1) * 2 * I + (I + 1) * h);
  return (j.value("tie_word_embeddings", false) ? 1 : 2) * V * h + h + L * (attn + moe + 2 * h);
}

// Llama 4's text model (a llama4 file's text_config): on the moe_layers a router, E experts and
// one shared expert of intermediate_size; elsewhere a SwiGLU of intermediate_size_mlp; no norm
// weights on q and k.
std::int64_t llama4_params(const nlohmann::json& outer) {
  const nlohmann::json& j = outer.at("model_type") == "llama4" ? outer.at("text_config") : outer;
  const std::int64_t h = j.at("hidden_size"), L = j.at("num_hidden_layers"), V = j.at("vocab_size");
  const std::int64_t H = j.at("num_attention_heads"), KV = j.at("num_key_value_heads"), d = j.at("head_dim");
  const std::int64_t E = j.at("num_local_experts"), I = j.at("intermediate_size"), Im = j.at("intermediate_size_mlp");
  const std::int64_t attn = 2 * H * d * h + 2 * KV * d * h;
  std::int64_t total = (j.value("tie_word_embeddings", false) ? 1 : 2) * V * h + h;
  for (std::int64_t l = 0; l < L; ++l) {
    const auto& moe = j.at("moe_layers");
    const bool sparse = std::find(moe.begin(), moe.end(), l) != moe.end();
    total += attn + 2 * h + (sparse ? E * h + E * 3 * h * I + 3 * h * I : 3 * h * Im);
  }
  return total;
}

// The parameter count of a published config, read from its own fields; -1 for a model_type this
// counter does not know.
std::int64_t hf_file_params(const nlohmann::json& j) {
  const std::string type = j.at("model_type");
  if (type == "gpt2") return gpt2_params(j);
  if (type == "falcon" || type == "RefinedWeb" || type == "RefinedWebModel") return falcon_params(j);
  static const std::set<std::string> kDecoders = {"llama",  "mistral", "qwen2",       "qwen3", "granite",
                                                  "gemma",  "gemma2",  "gemma3_text", "phi3",  "olmo2",
                                                  "smollm3", "mixtral", "qwen3_moe", "qwen2_moe"};
  if (type == "deepseek_v2" || type == "deepseek_v3") return deepseek_params(j);
  if (type == "gpt_oss") return gpt_oss_params(j);
  if (type == "llama4") return llama4_params(j);
  return kDecoders.count(type) ? decoder_params(j) : -1;
}

enum class Expect { Imports, Refused };

struct PublishedFile {
  const char* file;
  std::int64_t params;  // the published count (README: where it was published)
  Expect expect;
  // Imports: fields the import must list as ignored. Refused: words its message must contain.
  std::vector<const char*> words;
};

const PublishedFile kPublishedFiles[] = {
    {"falcon-40b.json", 41'303'293'952, Expect::Imports, {"auto_map", "torch_dtype"}},
    // DeepSeek-V3: the Hub's 684,531,386,000 ("685B") counts the multi-token-prediction layer
    // (13,463,426,304 as stored) and 41,540,496 fp8 block scales; 671B is the model's own.
    {"deepseek-v3.json", 671'026'419'200, Expect::Imports, {"quantization_config", "num_nextn_predict_layers", "ep_size"}},
    {"deepseek-v2.json", 235'741'434'880, Expect::Imports, {"aux_loss_alpha", "seq_aux", "pretraining_tp"}},
    {"deepseek-v2-lite.json", 15'706'484'224, Expect::Imports, {"aux_loss_alpha", "seq_aux"}},
    {"falcon3-7b-instruct.json", 7'455'550'464, Expect::Imports, {"pretraining_tp", "use_cache"}},
    {"gemma-2-2b.json", 2'614'341'888, Expect::Imports, {"cache_implementation", "pad_token_id"}},
    {"gemma-2-9b.json", 9'241'705'984, Expect::Imports, {"sliding_window_size", "cache_implementation"}},
    {"gemma-3-1b-it.json", 999'885'952, Expect::Imports, {"cache_implementation", "pad_token_id"}},
    {"gpt2.json", 124'439'808, Expect::Imports, {"n_ctx", "summary_type", "task_specific_params"}},
    {"granite-3.3-8b-instruct.json", 8'170'864'640, Expect::Imports, {"pad_token_id", "torch_dtype"}},
    {"llama-2-7b.json", 6'738'415'616, Expect::Imports, {"_name_or_path", "pretraining_tp"}},
    {"llama-3.1-8b-instruct.json", 8'030'261'248, Expect::Imports, {"eos_token_id", "pretraining_tp"}},
    {"llama-3.1-8b.json", 8'030'261'248, Expect::Imports, {"pretraining_tp"}},
    {"llama-3.2-1b.json", 1'235'814'400, Expect::Imports, {"pretraining_tp"}},
    {"llama-3.2-3b.json", 3'212'749'824, Expect::Imports, {"pretraining_tp"}},
    {"meta-llama-3-8b.json", 8'030'261'248, Expect::Imports, {"pretraining_tp"}},
    {"mistral-7b-instruct-v0.3.json", 7'248'023'552, Expect::Imports, {"torch_dtype"}},
    {"mistral-7b-v0.1.json", 7'241'732'096, Expect::Imports, {"torch_dtype"}},
    {"mixtral-8x7b-v0.1.json", 46'702'792'704, Expect::Imports, {"torch_dtype", "bos_token_id"}},
    {"olmo-2-1124-7b-instruct.json", 7'298'617'344, Expect::Imports, {"_name_or_path", "pad_token_id"}},
    {"phi-3-mini-4k-instruct.json", 3'821'079'552, Expect::Imports, {"auto_map", "pad_token_id"}},
    {"gpt-oss-20b.json", 20'914'757'184, Expect::Imports, {"quantization_config", "initial_context_length", "experts_per_token"}},
    // Llama 4 Scout's text model: the Hub's count less the vision tower (README).
    {"llama-4-scout-17b-16e.json", 107'769'861'120, Expect::Imports, {"vision_config", "router_aux_loss_coef", "for_llm_compressor"}},
    {"phi-4-mini-instruct.json", 3'836'021'760, Expect::Refused,
     {"full_attn_mod", "interpolate_factor", "lm_head_bias"}},
    {"qwen1.5-moe-a2.7b-chat.json", 14'315'784'192, Expect::Imports, {"sliding_window", "max_window_layers", "torch_dtype"}},
    {"qwen2-7b.json", 7'615'616'512, Expect::Imports, {"sliding_window", "max_window_layers"}},
    {"qwen2.5-0.5b.json", 494'032'768, Expect::Imports, {"use_mrope", "sliding_window", "max_window_layers"}},
    {"qwen2.5-14b.json", 14'770'033'664, Expect::Imports, {"sliding_window", "max_window_layers"}},
    {"qwen2.5-3b.json", 3'085'938'688, Expect::Imports, {"use_mrope", "sliding_window"}},
    {"qwen2.5-7b.json", 7'615'616'512, Expect::Imports, {"use_mrope", "sliding_window"}},
    {"qwen3-0.6b.json", 596'049'920, Expect::Imports, {"sliding_window", "max_window_layers"}},
    {"qwen3-0.6b-transformers5.json", 596'049'920, Expect::Imports, {"dtype", "pad_token_id", "sliding_window"}},
    {"qwen3-30b-a3b.json", 30'532'122'624, Expect::Imports, {"sliding_window", "max_window_layers", "torch_dtype"}},
    {"qwen3-14b.json", 14'768'307'200, Expect::Imports, {"sliding_window", "max_window_layers"}},
    {"qwen3-8b-base.json", 8'190'735'360, Expect::Imports, {"sliding_window", "max_window_layers"}},
    {"qwen3-8b.json", 8'190'735'360, Expect::Imports, {"sliding_window", "max_window_layers"}},
    {"smollm2-135m.json", 134'515'008, Expect::Imports, {"is_llama_config", "rope_interleaved", "pretraining_tp"}},
    {"smollm3-3b.json", 3'075'098'624, Expect::Imports, {"max_window_layers", "pretraining_tp", "sliding_window"}},
};

// The refusal's message, or "" when the file imports (into `m`).
std::string hf_file_refusal(const std::string& file, ModelConfig& m) {
  try {
    m = load_model_file(hf_file_path(file));
    return "";
  } catch (const ConfigError& e) {
    return e.what();
  }
}

TEST(HfPublishedConfigs, EveryFileHasItsPublishedCountAndImportsOrIsRefusedInWords) {
  for (const PublishedFile& f : kPublishedFiles) {
    SCOPED_TRACE(f.file);
    EXPECT_EQ(hf_file_params(hf_file_json(f.file)), f.params);
    ModelConfig m;
    const std::string refusal = hf_file_refusal(f.file, m);
    if (f.expect == Expect::Imports) {
      ASSERT_EQ(refusal, "");
      EXPECT_EQ(ParamLayout(m).total(), f.params);
      for (const char* k : f.words)
        EXPECT_NE(std::find(m.ignored_fields.begin(), m.ignored_fields.end(), k), m.ignored_fields.end())
            << k << " not listed as ignored";
    } else {
      ASSERT_NE(refusal, "") << "imported";
      for (const char* w : f.words) EXPECT_NE(refusal.find(w), std::string::npos) << w << " missing from: " << refusal;
    }
  }
}

// The same published model in both layouts (Qwen3-0.6B as its repository has it, and as
// transformers 5 loads and writes it: rope_parameters, layer_types, dtype) imports as one model.
TEST(HfPublishedConfigs, TheTransformersFiveFileIsTheSameModelAsTheFourFile) {
  const ModelConfig four = load_model_file(hf_file_path("qwen3-0.6b.json"));
  const ModelConfig five = load_model_file(hf_file_path("qwen3-0.6b-transformers5.json"));
  EXPECT_EQ(five.rope_theta, 1000000.0);
  nlohmann::json a = model_to_json(four), b = model_to_json(five);
  a.erase("name");
  b.erase("name");
  EXPECT_EQ(a, b);
  EXPECT_TRUE(five.layer_kinds.empty());  // every layer full attention: no kinds needed
}

// Every file in the directory has its row, and the directory holds at least 25 of them.
TEST(HfPublishedConfigs, EveryFileInTheDirectoryIsInTheTable) {
  std::set<std::string> rows;
  for (const PublishedFile& f : kPublishedFiles) rows.insert(f.file);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(REMAT_TEST_DATA_DIR) + "/hf-configs")) {
    if (e.path().extension() != ".json") continue;
    ++files;
    EXPECT_TRUE(rows.count(e.path().filename().string())) << e.path().filename() << " has no row";
  }
  EXPECT_EQ(files, static_cast<int>(rows.size()));
  EXPECT_GE(files, 25);
}

// The counter is the file's: untying a tied head adds V·h, and a model_type it does not know has
// no count rather than a guess.
TEST(HfPublishedConfigs, TheCountFollowsTheFileNotTheName) {
  nlohmann::json j = hf_file_json("smollm2-135m.json");
  j["tie_word_embeddings"] = false;
  EXPECT_EQ(hf_file_params(j), 134'515'008 + 49'152ll * 576);
  j["model_type"] = "mamba";
  EXPECT_EQ(hf_file_params(j), -1);
}

// The fields the published files carry are refused at values that would change the step, each by
// name, in one message.
TEST(HfPublishedConfigs, TheirIgnoredFieldsAreRefusedAtValuesThatChangeTheStep) {
  nlohmann::json smol = hf_file_json("smollm2-135m.json");
  smol["rope_interleaved"] = true;
  smol["use_mrope"] = true;
  smol["sliding_window_size"] = 512;
  try {
    model_from_hf_json(smol, "x");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    const std::string w = e.what();
    for (const char* k : {"rope_interleaved", "use_mrope", "sliding_window_size"})
      EXPECT_NE(w.find(k), std::string::npos) << k << " missing from: " << w;
    EXPECT_NE(w.find("(3 problems)"), std::string::npos) << w;
  }
}

}  // namespace
}  // namespace remat
