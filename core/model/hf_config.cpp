// Import of Hugging Face config.json files: the shared field readers and the GPT-2 import; the
// Llama-like families are in hf_families.cpp.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/model/hf_fields.h"
#include "core/model/model_config.h"
#include "core/util/error.h"
#include "core/util/json_io.h"

namespace remat {

namespace hf {

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
    "gradient_checkpointing", "torchscript", "use_return_dict", "cache_implementation",
    "attn_implementation", "_attn_implementation", "auto_map", "sep_token_id", "unk_token_id",
    "classifier_dropout"};

// Fields that published configs carry and that change nothing in the step at the values given:
// listed as ignored there; any other value is a problem that says what it would change.
struct InertField {
  const char* key;
  // Whether `v` is a value that changes nothing (`j` the whole config).
  bool (*inert)(const nlohmann::json& v, const nlohmann::json& j);
  const char* otherwise;  // why another value is refused
};
const InertField kInert[] = {
    // Qwen2.5: multimodal RoPE, on only in the vision-language models.
    {"use_mrope", [](const nlohmann::json& v, const nlohmann::json&) { return v.is_boolean() && !v.get<bool>(); },
     "multimodal RoPE (true) is not modelled"},
    // SmolLM2: a marker of the Llama layout, and the rotary halves not interleaved (Llama's).
    {"is_llama_config", [](const nlohmann::json& v, const nlohmann::json&) { return v.is_boolean(); },
     "must be true or false"},
    {"rope_interleaved", [](const nlohmann::json& v, const nlohmann::json&) { return v.is_boolean() && !v.get<bool>(); },
     "interleaved rotary pairs (true) are not modelled; Llama rotates the two halves (false)"},
    // DeepSeek: inference and packaging. ep_size: the expert-parallel size of an inference setup;
    // num_nextn_predict_layers: the multi-token-prediction layers, not part of Hugging Face's
    // model; quantization_config: how the published weights are stored (fp8 blocks).
    {"ep_size", [](const nlohmann::json& v, const nlohmann::json&) { return v.is_number_integer(); }, "must be an integer"},
    {"num_nextn_predict_layers", [](const nlohmann::json& v, const nlohmann::json&) { return v.is_number_integer() && v.get<long long>() >= 0; },
     "must be a count of layers"},
    {"quantization_config", [](const nlohmann::json& v, const nlohmann::json&) { return v.is_object() || v.is_null(); },
     "must be an object"},
    // DeepSeek-V2's auxiliary-loss settings: transformers' model adds no auxiliary loss.
    {"aux_loss_alpha", [](const nlohmann::json& v, const nlohmann::json&) { return v.is_number(); }, "must be a number"},
    {"seq_aux", [](const nlohmann::json& v, const nlohmann::json&) { return v.is_boolean(); }, "must be true or false"},
    // gpt-oss: the context its pretraining started at (YaRN's original length says it again), and
    // the experts per token again under another name.
    {"initial_context_length", [](const nlohmann::json& v, const nlohmann::json&) { return v.is_number_integer(); },
     "must be an integer"},
    {"experts_per_token",
     [](const nlohmann::json& v, const nlohmann::json& j) {
       return v.is_number_integer() && (!j.contains("num_experts_per_tok") || j.at("num_experts_per_tok") == v);
     },
     "must equal num_experts_per_tok (4 when absent), the experts each token goes to, which transformers reads "
     "instead"},
    // Llama 4: its causal LM adds no load-balancing loss and never reads the router's noise;
    // for_llm_compressor marks checkpoints prepared for quantization tools.
    {"output_router_logits", [](const nlohmann::json& v, const nlohmann::json&) { return v.is_boolean(); },
     "must be true or false"},
    {"router_aux_loss_coef", [](const nlohmann::json& v, const nlohmann::json&) { return v.is_number(); },
     "must be a number"},
    {"router_jitter_noise", [](const nlohmann::json& v, const nlohmann::json&) { return v.is_number(); },
     "must be a number"},
    {"for_llm_compressor", [](const nlohmann::json& v, const nlohmann::json&) { return v.is_boolean(); },
     "must be true or false"},
    // gemma-2-9b: the window again under an older name, the same value.
    {"sliding_window_size",
     [](const nlohmann::json& v, const nlohmann::json& j) {
       return v.is_number_integer() && j.contains("sliding_window") && j.at("sliding_window") == v;
     },
     "must equal sliding_window, the window the step uses"},
};

}  // namespace

const nlohmann::json& field(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) throw ConfigError(key, "missing from the Hugging Face config");
  return j.at(key);
}

int int_field(const nlohmann::json& j, const char* key) {
  int v = json_int(field(j, key), key);
  if (v <= 0) throw ConfigError(key, "must be a positive integer, got " + std::to_string(v));
  return v;
}

int int_field(const nlohmann::json& j, const char* key, int fallback) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  return int_field(j, key);
}

void set_dropout(ModelConfig& m, Problems& p, const std::vector<DropoutField>& fields) {
  m.dropout = 0.0;
  m.dropout_sites = 0;
  const DropoutField* first = nullptr;
  for (const auto& f : fields) {
    if (!(f.p >= 0.0 && f.p < 1.0)) {
      p.add(f.field, "must be in [0, 1), got " + std::to_string(f.p));
      continue;
    }
    if (f.p == 0.0) continue;
    if (first && f.p != first->p) {
      p.add(f.field, "RematLab uses one dropout probability for every site it applies to; " +
                         std::string(f.field) + " = " + std::to_string(f.p) + " differs from " +
                         first->field + " = " + std::to_string(first->p));
      continue;
    }
    if (!first) first = &f;
    m.dropout = f.p;
    m.dropout_sites |= f.sites;
  }
  if (m.dropout_sites == 0) m.dropout_sites = kDropAll;
}

void set_attention_hidden_dropout(ModelConfig& m, Problems& p, const nlohmann::json& j) {
  set_dropout(m, p, {{"attention_dropout", p.take([&] { return num_field(j, "attention_dropout", 0.0); }, 0.0), kDropAttention},
                     {"hidden_dropout", p.take([&] { return num_field(j, "hidden_dropout", 0.0); }, 0.0), kDropResidual}});
}

void read_rope_scaling(ModelConfig& m, Problems& p, const nlohmann::json& j) {
  if (!j.contains("rope_scaling") || j.at("rope_scaling").is_null()) return;
  std::vector<std::pair<std::string, std::string>> problems;
  m.rope_scaling = rope_scaling_from_json(j.at("rope_scaling"), problems);
  for (auto& [field, msg] : problems) p.add(field, msg);
}

double num_field(const nlohmann::json& j, const char* key, double fallback) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  return json_number(j.at(key), key);
}

// A boolean field, `fallback` when absent or null.
bool bool_field(const nlohmann::json& j, const char* key, bool fallback) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  return json_bool(j.at(key), key);
}

// A boolean field that must have `modelled` (its Hugging Face default) for the step we run.
void require_flag(const nlohmann::json& j, const char* key, bool modelled, const std::string& why) {
  if (bool_field(j, key, modelled) != modelled)
    throw ConfigError(key, std::string(modelled ? "false" : "true") + " is not modelled: " + why);
}

std::string string_field(const nlohmann::json& j, const char* key, const std::string& fallback) {
  if (!j.contains(key)) return fallback;
  const auto& v = j.at(key);
  if (!v.is_string()) throw ConfigError(key, "must be a string, got " + json_snippet(v));
  return v.get<std::string>();
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
    const auto inert = std::find_if(std::begin(kInert), std::end(kInert), [&](const InertField& f) { return k == f.key; });
    if (inert != std::end(kInert)) {
      if (inert->inert(*it, j)) ignored.push_back(k);
      else p.add(k, std::string(inert->otherwise) + " (value " + json_snippet(*it) + ")");
      continue;
    }
    p.add(k, "Hugging Face field not modelled by RematLab (value " + json_snippet(*it) +
                 "); remove it only if it does not change the training step");
  }
}

namespace {

// Sizes that must agree, checked together so every problem is reported.
void check_sizes_impl(const ModelConfig& m, Problems& p) {
  if (m.heads > 0 && m.kv_heads > 0 && m.heads % m.kv_heads != 0)
    p.add("num_key_value_heads", std::to_string(m.kv_heads) + " does not divide the " +
                                     std::to_string(m.heads) + " attention heads");
  // (DeepSeek-V3's latent heads have their own width; transformers' V2 config checks it still.)
  if (m.head_size == 0 && m.family != Family::DeepseekV3 && m.heads > 0 && m.hidden % m.heads != 0)
    p.add("num_attention_heads", "hidden size " + std::to_string(m.hidden) + " is not divisible by " +
                                     std::to_string(m.heads) + " heads; give head_dim");
}

}  // namespace

namespace {

// GPT-2's default inner width, 4 * n_embd, refused by name where it does not fit an int.
int four_times_hidden(int hidden) {
  if (hidden > std::numeric_limits<int>::max() / 4)
    throw ConfigError("n_embd", std::to_string(hidden) + " is too large: 4 * n_embd, the default n_inner, does not fit");
  return 4 * hidden;
}

}  // namespace

void check_sizes(const ModelConfig& m, Problems& p) { check_sizes_impl(m, p); }

ModelConfig gpt2_from_hf(const nlohmann::json& j, Problems& p, std::vector<std::string>& ignored) {
  sort_fields(j, {"n_layer", "n_embd", "n_head", "n_positions", "vocab_size", "n_inner",
                  "activation_function", "resid_pdrop", "embd_pdrop", "attn_pdrop",
                  "layer_norm_epsilon", "tie_word_embeddings", "scale_attn_weights",
                  "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"},
              p, ignored);
  ModelConfig m;
  set_family(m, Family::Gpt2);
  m.layers = p.take([&] { return int_field(j, "n_layer"); }, 1);
  m.hidden = p.take([&] { return int_field(j, "n_embd"); }, 1);
  m.heads = p.take([&] { return int_field(j, "n_head"); }, 1);
  m.kv_heads = m.heads;
  m.positions = p.take([&] { return int_field(j, "n_positions"); }, 1);
  m.vocab = p.take([&] { return int_field(j, "vocab_size"); }, 1);
  m.ffn = p.take([&] { return (j.contains("n_inner") && !j.at("n_inner").is_null()) ? int_field(j, "n_inner")
                                                                                    : four_times_hidden(m.hidden); }, 4);
  m.mlp = p.take([&] {
    std::string act = string_field(j, "activation_function", "gelu_new");
    if (act == "gelu_new" || act == "gelu_pytorch_tanh") return MlpKind::GeluTanh;
    if (act == "gelu") return MlpKind::Gelu;
    throw ConfigError("activation_function", "'" + act + "' is not modelled (gelu_new, gelu_pytorch_tanh: tanh GELU; gelu: exact GELU)");
  }, MlpKind::GeluTanh);
  m.tied_embeddings = p.take([&] { return bool_field(j, "tie_word_embeddings", true); }, true);
  // Scores are q·k / sqrt(d) (scale_attn_weights), also / (layer + 1) when asked. Our scores,
  // softmax and products are computed in fp32 whatever the storage, which is what
  // reorder_and_upcast_attn asks for, so that flag changes nothing here.
  m.attn_scale = p.take([&] { return bool_field(j, "scale_attn_weights", true) ? 0.0 : 1.0; }, 0.0);
  m.attn_scale_inverse_layer = p.take([&] { return bool_field(j, "scale_attn_by_inverse_layer_idx", false); }, false);
  p.check([&] { bool_field(j, "reorder_and_upcast_attn", false); });
  const double pr = p.take([&] { return num_field(j, "resid_pdrop", 0.1); }, 0.1),
               pe = p.take([&] { return num_field(j, "embd_pdrop", 0.1); }, 0.1),
               pa = p.take([&] { return num_field(j, "attn_pdrop", 0.1); }, 0.1);
  set_dropout(m, p, {{"embd_pdrop", pe, kDropEmbedding}, {"attn_pdrop", pa, kDropAttention},
                     {"resid_pdrop", pr, kDropResidual}});
  m.norm_eps = p.take([&] { return num_field(j, "layer_norm_epsilon", 1e-5); }, 1e-5);
  m.seq = std::min(m.positions, 1024);
  m.batch = 1;
  return m;
}

}  // namespace hf

namespace {

// Families people ask for that are not modelled: the nearest that is, and what it lacks.
struct NearFamily {
  const char* type;
  const char* nearest;
  const char* missing;
};
const NearFamily kNearFamilies[] = {
    {"qwen3_next", "qwen3_moe", "its gated DeltaNet (linear attention) layers and gated attention"},
};

// transformers 5 writes RoPE's parameters as one object, `rope_parameters` ({"rope_type": ...,
// "rope_theta": ..., the type's own fields, maybe "partial_rotary_factor"}), or one such object
// per layer kind. Read here into the 4.x fields they replace (rope_theta, rope_scaling,
// partial_rotary_factor), so both layouts mean the same; a top-level field that says otherwise
// is a problem, as are kinds with different parameters (a RoPE per layer kind is not modelled).
void read_rope_parameters(nlohmann::json& j, hf::Problems& p) {
  if (!j.contains("rope_parameters")) return;
  nlohmann::json rp = j.at("rope_parameters");
  j.erase("rope_parameters");
  if (rp.is_null()) return;
  if (!rp.is_object()) {
    p.add("rope_parameters", "must be an object, got " + json_snippet(rp));
    return;
  }
  // Per layer kind: {"full_attention": {...}, "sliding_attention": {...}}. Gemma 3's sliding kind,
  // plain RoPE on its own base, is its rope_local_base_freq.
  if (!rp.contains("rope_type") && !rp.contains("rope_theta") && !rp.empty() && rp.begin()->is_object()) {
    if (j.value("model_type", std::string()) == "gemma3_text" && rp.contains("full_attention") && rp.contains("sliding_attention") && rp.at("sliding_attention").is_object() &&
        rp.at("full_attention") != rp.at("sliding_attention")) {
      const nlohmann::json& local = rp.at("sliding_attention");
      const auto type = local.find("rope_type");
      const bool plain = (type == local.end() || *type == "default") &&
                         local.size() == (type != local.end() ? 1u : 0u) + (local.contains("rope_theta") ? 1u : 0u);
      if (plain) {
        if (local.contains("rope_theta")) {
          if (j.contains("rope_local_base_freq") && j.at("rope_local_base_freq") != local.at("rope_theta"))
            p.add("rope_parameters", "sliding_attention's rope_theta " + json_snippet(local.at("rope_theta")) +
                                         " contradicts rope_local_base_freq " + json_snippet(j.at("rope_local_base_freq")));
          j["rope_local_base_freq"] = local.at("rope_theta");
        } else if (!j.contains("rope_local_base_freq")) {
          j["rope_local_base_freq"] = 10000.0;  // Gemma 3's default: the windowed kind on its own base
        }
        rp.erase("sliding_attention");
      }
    }
    const nlohmann::json first = *rp.begin();
    for (auto it = rp.begin(); it != rp.end(); ++it)
      if (*it != first) {
        p.add("rope_parameters", "a RoPE per layer kind (" + rp.begin().key() + " and " + it.key() +
                                     " differ) is not modelled");
        return;
      }
    rp = first;
  }
  auto take = [&](const char* key) {
    if (!rp.contains(key)) return;
    if (j.contains(key) && !j.at(key).is_null() && j.at(key) != rp.at(key))
      p.add("rope_parameters", std::string(key) + " " + json_snippet(rp.at(key)) + " contradicts the top-level " +
                                   key + " " + json_snippet(j.at(key)));
    else
      j[key] = rp.at(key);
    rp.erase(key);
  };
  take("rope_theta");
  take("partial_rotary_factor");
  const std::string type = rp.contains("rope_type") && rp.at("rope_type").is_string() ? rp.at("rope_type").get<std::string>() : "";
  if (type == "default" && rp.size() == 1) return;  // nothing beyond the base
  if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null() && j.at("rope_scaling") != rp)
    p.add("rope_parameters", "contradicts rope_scaling " + json_snippet(j.at("rope_scaling")));
  else
    j["rope_scaling"] = rp;
}

// `layer_types` (transformers 5): each layer's attention. A list the family's own features
// describe is read as them (so the model and its files are as without it); any other pattern of
// sliding and full attention becomes layer kinds (layer_kind.h): "sliding_attention" with the
// config's window (and, for Gemma 3, its local RoPE base), "full_attention" without one.
void apply_layer_types(const nlohmann::json& lt, ModelConfig& m, int config_window, hf::Problems& p) {
  if (lt.is_null()) return;
  if (!lt.is_array()) {
    p.add("layer_types", "must be a list of layer kinds, got " + json_snippet(lt));
    return;
  }
  if (static_cast<int>(lt.size()) != m.layers) {
    p.add("layer_types", "lists " + std::to_string(lt.size()) + " layers; num_hidden_layers is " + std::to_string(m.layers));
    return;
  }
  bool same = true;
  int window = 0;  // the window a sliding layer of the family's layout has
  for (int l = 0; l < m.layers; ++l) {
    const nlohmann::json& k = lt[static_cast<std::size_t>(l)];
    const std::string kind = k.is_string() ? k.get<std::string>() : "";
    if (kind != "full_attention" && kind != "sliding_attention") {
      p.add("layer_types", "layer " + std::to_string(l) + " is " + json_snippet(k) +
                               " (known: full_attention, sliding_attention)");
      return;
    }
    same = same && kind == (m.window_of(l) > 0 ? "sliding_attention" : "full_attention");
    window = std::max(window, m.window_of(l));
  }
  if (same) return;
  if (window == 0) window = m.sliding_window > 0 ? m.sliding_window : config_window;
  LayerKind full{"full_attention"}, sliding{"sliding_attention", window, m.rope_local_theta};
  // Each layer keeps its MLP (the mixtures of experts' dense layers are kinds already).
  std::vector<bool> moe(static_cast<std::size_t>(m.layers));
  for (int l = 0; l < m.layers; ++l) moe[static_cast<std::size_t>(l)] = m.moe_in(l);
  const bool mixed = std::any_of(moe.begin(), moe.end(), [](bool x) { return x; }) &&
                     !std::all_of(moe.begin(), moe.end(), [](bool x) { return x; });
  m.layer_kinds.clear();
  m.layer_pattern.clear();
  for (int l = 0; l < m.layers; ++l) {
    LayerKind k = lt[static_cast<std::size_t>(l)] == "sliding_attention" ? sliding : full;
    if (moe[static_cast<std::size_t>(l)]) k.mlp = LayerMlp::Moe;
    if (mixed) k.name += moe[static_cast<std::size_t>(l)] ? "+moe" : "+dense_mlp";
    if (lt[static_cast<std::size_t>(l)] == "sliding_attention" && window == 0) {
      p.add("layer_types", "layer " + std::to_string(l) + " is sliding_attention, but the config gives no window "
                           "(sliding_window, or use_sliding_window false)");
      return;
    }
    auto at = std::find(m.layer_kinds.begin(), m.layer_kinds.end(), k);
    if (at == m.layer_kinds.end()) at = m.layer_kinds.insert(m.layer_kinds.end(), k);
    m.layer_pattern.push_back(static_cast<int>(at - m.layer_kinds.begin()));
  }
  m.sliding_window = 0;  // the kinds give every layer's window and base
  m.window_layers = WindowLayers::All;
  m.window_pattern = 0;
  m.rope_local_theta = 0.0;
}

}  // namespace

ModelConfig model_from_hf_json(const nlohmann::json& outer, const std::string& name) {
  using namespace hf;
  Problems p;
  std::vector<std::string> ignored;
  // Llama 4's published configs (model_type llama4) hold the text model in text_config; its
  // vision tower and the image tokens are not part of a text step.
  const bool llama4_outer = outer.at("model_type") == "llama4";
  if (llama4_outer && !(outer.contains("text_config") && outer.at("text_config").is_object() &&
                        (!outer.at("text_config").contains("model_type") ||
                         outer.at("text_config").at("model_type") == "llama4_text")))
    throw ConfigError("text_config", "a llama4 config trains its text model: give text_config (model_type llama4_text)");
  nlohmann::json text;
  if (llama4_outer) {
    text = outer.at("text_config");
    text["model_type"] = "llama4_text";
    for (const auto& [key, v] : outer.items())
      if (key != "text_config" && key != "model_type") ignored.push_back(key);
  }
  const nlohmann::json& in = llama4_outer ? text : outer;
  std::string type = in.at("model_type").is_string() ? in.at("model_type").get<std::string>() : "";
  // transformers 5's fields read as the 4.x ones they replace.
  nlohmann::json j = in;
  // (rope_scaling null: no scaling in transformers 4; rope_parameters null: its default.)
  if (type == "gpt_oss")
    gpt_oss_defaults(j, in.contains("rope_scaling") || (in.contains("rope_parameters") && !in.at("rope_parameters").is_null()));
  if (type == "llama4_text") llama4_defaults(j);
  read_rope_parameters(j, p);
  // (Llama 4 reads its own layer_types: chunked or full attention.)
  const nlohmann::json layer_types = j.contains("layer_types") && type != "llama4_text" ? j.at("layer_types") : nlohmann::json();
  if (type != "llama4_text") j.erase("layer_types");
  // transformers derives layer_types from Qwen's max_window_layers (read while use_sliding_window
  // is true) only where they are not given.
  const bool qwen = type == "qwen2" || type == "qwen3" || type == "qwen3_moe" || type == "qwen2_moe";
  // Qwen2, Qwen3 and SmolLM3 (refused there: not modelled) read their window only while it is.
  const bool sliding_on = in.contains("use_sliding_window") && in.at("use_sliding_window") == true;
  const bool window_gated = qwen || type == "smollm3";
  const bool qwen_sliding = qwen && sliding_on;
  const bool superseded = qwen_sliding && layer_types.is_array() && j.contains("max_window_layers");
  if (superseded) j.erase("max_window_layers");
  // Gemma 3 configs saved with layer_types alone: the pattern is the first global layer's place
  // (check_layer_types then holds every layer to it).
  if (type == "gemma3_text" && layer_types.is_array() && !j.contains("sliding_window_pattern")) {
    int pattern = static_cast<int>(layer_types.size()) + 1;
    for (std::size_t l = 0; l < layer_types.size(); ++l)
      if (layer_types[l] == "full_attention") {
        pattern = static_cast<int>(l) + 1;
        break;
      }
    j["sliding_window_pattern"] = std::max(2, pattern);
  }
  ModelConfig m;
  if (type == "gpt2") {
    m = gpt2_from_hf(j, p, ignored);
  } else if (type == "gpt_neox") {
    m = gpt_neox_from_hf(j, p, ignored);
  } else if (type == "falcon" || type == "RefinedWeb" || type == "RefinedWebModel") {
    m = falcon_from_hf(j, type, p, ignored);
  } else if (auto f = hf_family(type)) {
    m = decoder_from_hf(j, *f, p, ignored);
  } else {
    std::string known = "gpt2";
    for (const auto& n : hf_family_types()) known += ", " + n;
    known += ", gpt_neox, falcon";
    std::string near;
    for (const NearFamily& n : kNearFamilies)
      if (type == n.type) near = "; the nearest supported is " + std::string(n.nearest) + ", without " + n.missing;
    throw ConfigError("model_type", "unsupported Hugging Face model_type " + json_snippet(j.at("model_type")) + near +
                                        " (known: " + known + ")");
  }
  check_sizes(m, p);
  // The config's window, for sliding layers the family's layout has none of (Qwen's
  // max_window_layers past the last layer); Qwen's only while use_sliding_window is true.
  const nlohmann::json& sw = in.contains("sliding_window") ? in.at("sliding_window") : nlohmann::json();
  const int config_window = sw.is_number_integer() && sw.get<long long>() > 0 && sw.get<long long>() < (1LL << 30) &&
                                    (!window_gated || sliding_on)
                                ? static_cast<int>(sw.get<long long>())
                                : 0;
  apply_layer_types(layer_types, m, config_window, p);
  if (m.family == Family::SmolLM3) apply_no_rope_layers(j, m, p);
  p.throw_if_any();
  m.name = name;
  if (superseded) ignored.push_back("max_window_layers");
  m.ignored_fields = std::move(ignored);
  m.validate();
  return m;
}

}  // namespace remat
