// Import of Hugging Face config.json files (GPT-2 and Llama field names).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "core/model/model_config.h"
#include "core/util/error.h"
#include "core/util/json_io.h"

namespace remat {

namespace {

// Fields that describe packaging, tokenizer or inference, not the training step we model.
const std::set<std::string> kMetadata = {
    "architectures",   "model_type",        "transformers_version", "torch_dtype",
    "bos_token_id",    "eos_token_id",      "pad_token_id",          "use_cache",
    "initializer_range", "task_specific_params", "summary_type",     "summary_use_proj",
    "summary_activation", "summary_proj_to_labels", "summary_first_dropout", "_name_or_path",
    "id2label",        "label2id",          "tokenizer_class",       "pretraining_tp",
    "scale_attn_weights", "reorder_and_upcast_attn", "scale_attn_by_inverse_layer_idx",
    "n_ctx",           "output_hidden_states", "output_attentions", "return_dict",
    "dtype"};

const nlohmann::json& field(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) throw ConfigError(key, "missing from the Hugging Face config");
  return j.at(key);
}

int int_field(const nlohmann::json& j, const char* key) {
  const auto& v = field(j, key);
  return json_int(v, key);
}

double num_field(const nlohmann::json& j, const char* key, double fallback) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  const auto& v = j.at(key);
  if (!v.is_number()) throw ConfigError(key, "must be a number, got " + json_snippet(v));
  return v.get<double>();
}

void refuse_unknown(const nlohmann::json& j, const std::set<std::string>& modelled) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (modelled.count(k) || kMetadata.count(k)) continue;
    throw ConfigError(k, "Hugging Face field not modelled by RematLab (value " + json_snippet(*it) + ")");
  }
}

ModelConfig gpt2_from_hf(const nlohmann::json& j) {
  refuse_unknown(j, {"n_layer", "n_embd", "n_head", "n_positions", "vocab_size", "n_inner",
                     "activation_function", "resid_pdrop", "embd_pdrop", "attn_pdrop",
                     "layer_norm_epsilon", "tie_word_embeddings"});
  ModelConfig m;
  m.arch = Architecture::Gpt2;
  m.layers = int_field(j, "n_layer");
  m.hidden = int_field(j, "n_embd");
  m.heads = int_field(j, "n_head");
  m.kv_heads = m.heads;
  m.positions = int_field(j, "n_positions");
  m.vocab = int_field(j, "vocab_size");
  m.ffn = (j.contains("n_inner") && !j.at("n_inner").is_null()) ? int_field(j, "n_inner")
                                                                 : 4 * m.hidden;
  if (j.contains("activation_function")) {
    if (!j.at("activation_function").is_string())
      throw ConfigError("activation_function", "must be a string, got " + j.at("activation_function").dump());
    std::string act = j.at("activation_function").get<std::string>();
    if (act != "gelu_new" && act != "gelu_pytorch_tanh")
      throw ConfigError("activation_function",
                        "'" + act + "' is not modelled (tanh GELU: gelu_new)");
  }
  if (j.contains("tie_word_embeddings") && !j.at("tie_word_embeddings").is_boolean())
    throw ConfigError("tie_word_embeddings", "must be true or false, got " + j.at("tie_word_embeddings").dump());
  if (j.contains("tie_word_embeddings") && !j.at("tie_word_embeddings").get<bool>())
    throw ConfigError("tie_word_embeddings", "gpt2 is modelled with a tied head; got false");
  double pr = num_field(j, "resid_pdrop", 0.1), pe = num_field(j, "embd_pdrop", 0.1),
         pa = num_field(j, "attn_pdrop", 0.1);
  if (pr != pe || pr != pa)
    throw ConfigError("attn_pdrop", "RematLab uses one dropout probability for every site; "
                                    "resid_pdrop, embd_pdrop and attn_pdrop differ");
  m.dropout = pr;
  m.norm_eps = num_field(j, "layer_norm_epsilon", 1e-5);
  m.seq = std::min(m.positions, 1024);
  m.batch = 1;
  return m;
}

ModelConfig llama_from_hf(const nlohmann::json& j) {
  refuse_unknown(j, {"hidden_size", "intermediate_size", "num_hidden_layers",
                     "num_attention_heads", "num_key_value_heads", "max_position_embeddings",
                     "vocab_size", "rms_norm_eps", "rope_theta", "hidden_act", "attention_bias",
                     "mlp_bias", "attention_dropout", "tie_word_embeddings", "rope_scaling",
                     "head_dim"});
  ModelConfig m;
  m.arch = Architecture::Llama;
  m.layers = int_field(j, "num_hidden_layers");
  m.hidden = int_field(j, "hidden_size");
  m.heads = int_field(j, "num_attention_heads");
  m.kv_heads = j.contains("num_key_value_heads") ? int_field(j, "num_key_value_heads") : m.heads;
  m.ffn = int_field(j, "intermediate_size");
  m.vocab = int_field(j, "vocab_size");
  m.positions = int_field(j, "max_position_embeddings");
  if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null())
    throw ConfigError("rope_scaling", "RoPE scaling is not modelled (value " +
                                          json_snippet(j.at("rope_scaling")) + ")");
  if (j.contains("hidden_act") && j.at("hidden_act") != "silu")
    throw ConfigError("hidden_act", "only silu (SwiGLU) is modelled, got " +
                                        json_snippet(j.at("hidden_act")));
  for (const char* k : {"attention_bias", "mlp_bias", "tie_word_embeddings"})
    if (j.contains(k) && j.at(k).is_boolean() && j.at(k).get<bool>())
      throw ConfigError(k, "true is not modelled for llama (biases off, untied head)");
  if (j.contains("head_dim") && !j.at("head_dim").is_null() && m.heads > 0 &&
      int_field(j, "head_dim") * m.heads != m.hidden)
    throw ConfigError("head_dim", "must equal hidden_size / num_attention_heads");
  m.dropout = num_field(j, "attention_dropout", 0.0);
  m.norm_eps = num_field(j, "rms_norm_eps", 1e-6);
  m.rope_theta = num_field(j, "rope_theta", 10000.0);
  m.seq = std::min(m.positions, 1024);
  m.batch = 1;
  return m;
}

}  // namespace

ModelConfig model_from_hf_json(const nlohmann::json& j, const std::string& name) {
  std::string type = j.at("model_type").is_string() ? j.at("model_type").get<std::string>() : "";
  ModelConfig m;
  if (type == "gpt2") m = gpt2_from_hf(j);
  else if (type == "llama") m = llama_from_hf(j);
  else throw ConfigError("model_type", "unsupported Hugging Face model_type " +
                                          json_snippet(j.at("model_type")) + " (gpt2 | llama)");
  m.name = name;
  m.validate();
  return m;
}

}  // namespace remat
