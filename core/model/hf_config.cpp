// Import of Hugging Face config.json files (GPT-2 and Llama field names).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

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
    "n_ctx",           "output_hidden_states", "output_attentions", "return_dict",
    "dtype",           "n_special",         "predict_special_tokens", "output_past",
    "gradient_checkpointing", "torchscript", "use_return_dict"};

// Every problem of a config, so one run reports them all: each check runs, what it throws is
// kept with its field, and the import fails at the end with the whole list.
class Problems {
 public:
  // f() or, when it throws a ConfigError, `fallback` with the problem kept.
  template <class T, class F>
  T take(F f, T fallback) {
    try {
      return f();
    } catch (const ConfigError& e) {
      keep(e);
      return fallback;
    }
  }
  template <class F>
  void check(F f) {
    take([&] { f(); return 0; }, 0);
  }
  void add(const std::string& field, const std::string& message) { list_.emplace_back(field, message); }
  bool empty() const { return list_.empty(); }
  // Throws ConfigProblems: a ConfigError naming the first field, its message saying every
  // problem, and the list itself.
  void throw_if_any() const {
    if (list_.empty()) return;
    std::string msg = list_[0].second;
    for (std::size_t i = 1; i < list_.size(); ++i) msg += "; also " + list_[i].first + ": " + list_[i].second;
    if (list_.size() > 1) msg += " (" + std::to_string(list_.size()) + " problems)";
    throw ConfigProblems(list_, msg);
  }

 private:
  void keep(const ConfigError& e) {
    std::string what = e.what();
    const std::string prefix = e.field() + ": ";
    add(e.field(), what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what);
  }
  std::vector<std::pair<std::string, std::string>> list_;
};

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

// A boolean field that must have `modelled` (its Hugging Face default) for the step we run.
void require_flag(const nlohmann::json& j, const char* key, bool modelled, const std::string& why) {
  if (!j.contains(key) || j.at(key).is_null()) return;
  const auto& v = j.at(key);
  if (!v.is_boolean()) throw ConfigError(key, "must be true or false, got " + json_snippet(v));
  if (v.get<bool>() != modelled)
    throw ConfigError(key, std::string(v.get<bool>() ? "true" : "false") + " is not modelled: " + why);
}

// Fields neither modelled nor packaging are problems; packaging fields are listed as ignored.
void sort_fields(const nlohmann::json& j, const std::set<std::string>& modelled, Problems& p,
                 std::vector<std::string>& ignored) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (modelled.count(k)) continue;
    if (kMetadata.count(k)) {
      if (k != "model_type") ignored.push_back(k);
      continue;
    }
    p.add(k, "Hugging Face field not modelled by RematLab (value " + json_snippet(*it) +
                 "); remove it only if it does not change the training step");
  }
}

ModelConfig gpt2_from_hf(const nlohmann::json& j, Problems& p, std::vector<std::string>& ignored) {
  sort_fields(j, {"n_layer", "n_embd", "n_head", "n_positions", "vocab_size", "n_inner",
                  "activation_function", "resid_pdrop", "embd_pdrop", "attn_pdrop",
                  "layer_norm_epsilon", "tie_word_embeddings", "scale_attn_weights",
                  "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"},
              p, ignored);
  ModelConfig m;
  m.arch = Architecture::Gpt2;
  m.layers = p.take([&] { return int_field(j, "n_layer"); }, 1);
  m.hidden = p.take([&] { return int_field(j, "n_embd"); }, 1);
  m.heads = p.take([&] { return int_field(j, "n_head"); }, 1);
  m.kv_heads = m.heads;
  m.positions = p.take([&] { return int_field(j, "n_positions"); }, 1);
  m.vocab = p.take([&] { return int_field(j, "vocab_size"); }, 1);
  m.ffn = p.take([&] { return (j.contains("n_inner") && !j.at("n_inner").is_null()) ? int_field(j, "n_inner")
                                                                                    : 4 * m.hidden; }, 4);
  p.check([&] {
    if (!j.contains("activation_function")) return;
    if (!j.at("activation_function").is_string())
      throw ConfigError("activation_function", "must be a string, got " + json_snippet(j.at("activation_function")));
    std::string act = j.at("activation_function").get<std::string>();
    if (act != "gelu_new" && act != "gelu_pytorch_tanh")
      throw ConfigError("activation_function", "'" + act + "' is not modelled (tanh GELU: gelu_new)");
  });
  p.check([&] { require_flag(j, "tie_word_embeddings", true, "gpt2 is modelled with a tied head"); });
  p.check([&] { require_flag(j, "scale_attn_weights", true, "attention scores are scaled by 1/sqrt(head_dim)"); });
  p.check([&] {
    require_flag(j, "scale_attn_by_inverse_layer_idx", false, "scores are not scaled by 1/(layer + 1)");
  });
  p.check([&] {
    require_flag(j, "reorder_and_upcast_attn", false, "the attention product is not upcast to fp32 separately");
  });
  const double pr = p.take([&] { return num_field(j, "resid_pdrop", 0.1); }, 0.1),
               pe = p.take([&] { return num_field(j, "embd_pdrop", 0.1); }, 0.1),
               pa = p.take([&] { return num_field(j, "attn_pdrop", 0.1); }, 0.1);
  if (pr != pe || pr != pa)
    p.add("attn_pdrop", "RematLab uses one dropout probability for every site; "
                        "resid_pdrop, embd_pdrop and attn_pdrop differ");
  m.dropout = pr;
  m.norm_eps = p.take([&] { return num_field(j, "layer_norm_epsilon", 1e-5); }, 1e-5);
  m.seq = std::min(m.positions, 1024);
  m.batch = 1;
  return m;
}

ModelConfig llama_from_hf(const nlohmann::json& j, Problems& p, std::vector<std::string>& ignored) {
  sort_fields(j, {"hidden_size", "intermediate_size", "num_hidden_layers",
                  "num_attention_heads", "num_key_value_heads", "max_position_embeddings",
                  "vocab_size", "rms_norm_eps", "rope_theta", "hidden_act", "attention_bias",
                  "mlp_bias", "attention_dropout", "tie_word_embeddings", "rope_scaling",
                  "head_dim"},
              p, ignored);
  ModelConfig m;
  m.arch = Architecture::Llama;
  m.layers = p.take([&] { return int_field(j, "num_hidden_layers"); }, 1);
  m.hidden = p.take([&] { return int_field(j, "hidden_size"); }, 1);
  m.heads = p.take([&] { return int_field(j, "num_attention_heads"); }, 1);
  m.kv_heads = p.take([&] { return j.contains("num_key_value_heads") ? int_field(j, "num_key_value_heads") : m.heads; }, 1);
  m.ffn = p.take([&] { return int_field(j, "intermediate_size"); }, 1);
  m.vocab = p.take([&] { return int_field(j, "vocab_size"); }, 1);
  m.positions = p.take([&] { return int_field(j, "max_position_embeddings"); }, 1);
  if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null())
    p.add("rope_scaling", "RoPE scaling is not modelled yet (value " + json_snippet(j.at("rope_scaling")) +
                              "); without it the config would train with unscaled RoPE frequencies");
  if (j.contains("hidden_act") && j.at("hidden_act") != "silu")
    p.add("hidden_act", "only silu (SwiGLU) is modelled, got " + json_snippet(j.at("hidden_act")));
  p.check([&] { require_flag(j, "attention_bias", false, "llama is modelled without q/k/v/o biases"); });
  p.check([&] { require_flag(j, "mlp_bias", false, "llama is modelled without MLP biases"); });
  p.check([&] { require_flag(j, "tie_word_embeddings", false, "llama is modelled with an untied head"); });
  p.check([&] {
    if (j.contains("head_dim") && !j.at("head_dim").is_null() && int_field(j, "head_dim") * m.heads != m.hidden)
      throw ConfigError("head_dim", "must equal hidden_size / num_attention_heads");
  });
  const double ad = p.take([&] { return num_field(j, "attention_dropout", 0.0); }, 0.0);
  if (ad != 0.0)
    p.add("attention_dropout", "Hugging Face Llama drops out the attention probabilities only; RematLab "
                               "would apply it at every site (set it to 0, or use our model JSON's dropout)");
  m.norm_eps = p.take([&] { return num_field(j, "rms_norm_eps", 1e-6); }, 1e-6);
  m.rope_theta = p.take([&] { return num_field(j, "rope_theta", 10000.0); }, 10000.0);
  m.seq = std::min(m.positions, 1024);
  m.batch = 1;
  return m;
}

}  // namespace

ModelConfig model_from_hf_json(const nlohmann::json& j, const std::string& name) {
  std::string type = j.at("model_type").is_string() ? j.at("model_type").get<std::string>() : "";
  Problems p;
  std::vector<std::string> ignored;
  ModelConfig m;
  if (type == "gpt2") m = gpt2_from_hf(j, p, ignored);
  else if (type == "llama") m = llama_from_hf(j, p, ignored);
  else throw ConfigError("model_type", "unsupported Hugging Face model_type " +
                                          json_snippet(j.at("model_type")) + " (known: gpt2, llama)");
  p.throw_if_any();
  m.name = name;
  m.ignored_fields = std::move(ignored);
  m.validate();
  return m;
}

}  // namespace remat
