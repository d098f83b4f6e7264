// Import of the Llama-like Hugging Face configs: llama, mistral, qwen2, qwen3, gemma, gemma2,
// phi3, olmo2, granite, gemma3_text, smollm3, the mixtures of experts mixtral, qwen3_moe and qwen2_moe
// (their expert fields: hf_moe.cpp), deepseek_v2 and deepseek_v3 (hf_deepseek.cpp) and gpt_oss
// (hf_gpt_oss.cpp), llama4_text (hf_llama4.cpp). One reader of the fields they share; each family
// adds or fixes its own.
#include <algorithm>
#include <cmath>

#include "core/model/hf_fields.h"
#include "core/util/json_io.h"

namespace remat::hf {

namespace {

struct FamilyType {
  const char* model_type;
  Family family;
};
const FamilyType kTypes[] = {{"llama", Family::Llama},   {"mistral", Family::Mistral},
                             {"qwen2", Family::Qwen2},   {"gemma", Family::Gemma},
                             {"gemma2", Family::Gemma2}, {"phi3", Family::Phi3},
                             {"olmo2", Family::Olmo2},   {"qwen3", Family::Qwen3},
                             {"granite", Family::Granite}, {"gemma3_text", Family::Gemma3},
                             {"smollm3", Family::SmolLM3}, {"mixtral", Family::Mixtral},
                             {"qwen3_moe", Family::Qwen3Moe}, {"qwen2_moe", Family::Qwen2Moe},
                             {"deepseek_v2", Family::DeepseekV2}, {"deepseek_v3", Family::DeepseekV3},
                             {"gpt_oss", Family::GptOss}, {"llama4_text", Family::Llama4}};

// Fields every family here reads.
const std::set<std::string> kShared = {
    "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "vocab_size", "rms_norm_eps",
    "rope_theta", "hidden_act", "attention_bias", "mlp_bias", "attention_dropout",
    "tie_word_embeddings", "rope_scaling", "head_dim", "partial_rotary_factor"};

// Per family: the fields it adds to kShared.
std::set<std::string> extra_fields(Family f) {
  switch (f) {
    case Family::Mistral: return {"sliding_window"};
    case Family::Qwen2:
    case Family::Qwen3: return {"sliding_window", "use_sliding_window", "max_window_layers"};
    case Family::Gemma: return {"hidden_activation"};
    case Family::Gemma2:
      return {"hidden_activation", "query_pre_attn_scalar", "attn_logit_softcapping",
              "final_logit_softcapping", "sliding_window"};
    case Family::Phi3:
      return {"sliding_window", "resid_pdrop", "embd_pdrop", "original_max_position_embeddings"};
    case Family::Gemma3:
      return {"hidden_activation", "query_pre_attn_scalar", "attn_logit_softcapping",
              "final_logit_softcapping", "sliding_window", "sliding_window_pattern",
              "rope_local_base_freq", "use_bidirectional_attention"};
    case Family::Granite:
      return {"embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling"};
    case Family::SmolLM3: return {"no_rope_layers", "no_rope_layer_interval", "use_sliding_window"};
    case Family::Mixtral:
    case Family::Qwen3Moe:
    case Family::Qwen2Moe: return moe_fields(f);
    case Family::DeepseekV2:
    case Family::DeepseekV3: return deepseek_fields();
    case Family::GptOss: return gpt_oss_fields();
    case Family::Llama4: return llama4_fields();
    default: return {};
  }
}

MlpKind activation(const nlohmann::json& j, Family f) {
  const bool gemma = f == Family::Gemma || f == Family::Gemma2 || f == Family::Gemma3;
  if (gemma) {
    // Gemma's MLP uses hidden_activation; when it is unset, the tanh approximation (Hugging Face
    // replaces the exact "gelu" of the original hidden_act with it).
    std::string act = string_field(j, "hidden_activation", "gelu_pytorch_tanh");
    if (act == "gelu_pytorch_tanh") return MlpKind::GeGlu;
    throw ConfigError("hidden_activation", "'" + act + "' is not modelled (gelu_pytorch_tanh: GeGLU with the tanh GELU)");
  }
  std::string act = string_field(j, "hidden_act", "silu");
  if (act != "silu") throw ConfigError("hidden_act", "'" + act + "' is not modelled (silu: SwiGLU)");
  return f == Family::GptOss ? MlpKind::SwiGluClamped : MlpKind::SwiGlu;
}

}  // namespace

std::optional<Family> hf_family(const std::string& model_type) {
  for (const auto& t : kTypes)
    if (model_type == t.model_type) return t.family;
  return std::nullopt;
}

std::vector<std::string> hf_family_types() {
  std::vector<std::string> v;
  for (const auto& t : kTypes) v.push_back(t.model_type);
  return v;
}

ModelConfig decoder_from_hf(const nlohmann::json& j, Family f, Problems& p,
                            std::vector<std::string>& ignored) {
  std::set<std::string> modelled = kShared;
  for (const auto& e : extra_fields(f)) modelled.insert(e);
  // Qwen2 and Qwen3 read their window only when use_sliding_window is true.
  const bool qwen = f == Family::Qwen2 || f == Family::Qwen3 || f == Family::Qwen3Moe || f == Family::Qwen2Moe;
  const bool qwen_window = qwen && p.take([&] { return bool_field(j, "use_sliding_window", false); }, false);
  // SmolLM3 slides only while use_sliding_window is true (refused below); its max_window_layers
  // is read by no layer.
  const bool smol = f == Family::SmolLM3;
  if ((qwen && !qwen_window) || smol) {
    for (const char* k : {"sliding_window", "max_window_layers"})
      if (j.contains(k)) {
        modelled.erase(k);
        ignored.push_back(k);
      }
  }
  std::set<std::string> sorted = modelled;
  for (const auto& k : ignored) sorted.insert(k);
  sort_fields(j, sorted, p, ignored);

  ModelConfig m;
  set_family(m, f);
  const bool gemma = f == Family::Gemma || f == Family::Gemma2 || f == Family::Gemma3;
  m.layers = p.take([&] { return int_field(j, "num_hidden_layers"); }, 1);
  m.hidden = p.take([&] { return int_field(j, "hidden_size"); }, 1);
  m.heads = p.take([&] { return int_field(j, "num_attention_heads"); }, 1);
  m.kv_heads = p.take([&] { return int_field(j, "num_key_value_heads", m.heads); }, 1);
  m.head_size = p.take([&] { return int_field(j, "head_dim", 0); }, 0);
  if (m.head_size > 0 && m.heads > 0 && m.hidden % m.heads == 0 && m.head_size == m.hidden / m.heads)
    m.head_size = 0;  // the default
  m.ffn = p.take([&] { return int_field(j, "intermediate_size"); }, 1);
  m.vocab = p.take([&] { return int_field(j, "vocab_size"); }, 1);
  m.positions = p.take([&] { return int_field(j, "max_position_embeddings"); }, 1);
  m.mlp = p.take([&] { return activation(j, f); }, m.mlp);
  m.norm_eps = p.take([&] { return num_field(j, "rms_norm_eps", 1e-6); }, 1e-6);
  m.rope_theta = p.take([&] { return num_field(j, "rope_theta", 10000.0); }, 10000.0);
  m.partial_rotary = p.take([&] { return num_field(j, "partial_rotary_factor", 1.0); }, 1.0);
  if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null()) {
    std::vector<std::pair<std::string, std::string>> problems;
    nlohmann::json rs = j.at("rope_scaling");
    // Phi-3 keeps LongRoPE's original context at the top level.
    if (f == Family::Phi3 && rs.is_object() && !rs.contains("original_max_position_embeddings") &&
        j.contains("original_max_position_embeddings"))
      rs["original_max_position_embeddings"] = j.at("original_max_position_embeddings");
    m.rope_scaling = rope_scaling_from_json(rs, problems);
    if (problems.empty() && m.heads > 0 && m.rotary_dim() > 0)
      validate_rope_scaling(m.rope_scaling, m.rotary_dim(), m.positions, problems);
    for (auto& [field, msg] : problems) p.add(field, msg);
  }
  m.tied_embeddings = p.take([&] { return bool_field(j, "tie_word_embeddings", gemma || smol); }, gemma || smol);
  if (smol)
    p.check([&] { require_flag(j, "use_sliding_window", false, "windows on SmolLM3's layers without RoPE are not modelled"); });
  const bool attn_bias = p.take([&] { return bool_field(j, "attention_bias", false); }, false);
  if (f == Family::Qwen2 || f == Family::Qwen2Moe) {
    p.check([&] { require_flag(j, "attention_bias", false, "Qwen2 has q/k/v biases and no o_proj bias"); });
  } else {
    m.qkv_bias = attn_bias;
    m.out_bias = attn_bias;
  }
  m.mlp_bias = p.take([&] { return bool_field(j, "mlp_bias", false); }, false);
  if (f == Family::Mistral || f == Family::Mixtral || f == Family::Gemma2 || f == Family::Gemma3 ||
      f == Family::Phi3 || f == Family::GptOss || qwen_window)
    m.sliding_window = p.take([&] { return int_field(j, "sliding_window", 0); }, 0);
  if (qwen_window) {
    // transformers windows the layers from max_window_layers on (its default 28): none when that
    // is past the last, every one from 0, else the two kinds.
    const int from = p.take([&] { return int_field(j, "max_window_layers", 28); }, 28);
    if (m.sliding_window > 0 && from >= m.layers) {
      m.sliding_window = 0;
    } else if (m.sliding_window > 0 && from > 0) {
      m.layer_kinds = {LayerKind{"full_attention"}, LayerKind{"sliding_attention", m.sliding_window}};
      for (int l = 0; l < m.layers; ++l) m.layer_pattern.push_back(l >= from ? 1 : 0);
      m.sliding_window = 0;
    }
  }
  if (f == Family::Granite) {
    // Hugging Face's Granite scales the scores by attention_multiplier (default 1), never by
    // 1/sqrt(head_dim).
    m.attn_scale = p.take([&] { return num_field(j, "attention_multiplier", 1.0); }, 1.0);
    m.embedding_multiplier = p.take([&] { return num_field(j, "embedding_multiplier", 1.0); }, 1.0);
    m.residual_multiplier = p.take([&] { return num_field(j, "residual_multiplier", 1.0); }, 1.0);
    m.logits_scaling = p.take([&] { return num_field(j, "logits_scaling", 1.0); }, 1.0);
  }
  if (f == Family::Gemma3) {
    // Five windowed blocks to each global one (sliding_window_pattern), the windowed ones on
    // their own RoPE base; attention within the window both ways is not modelled.
    m.window_pattern = p.take([&] { return int_field(j, "sliding_window_pattern", 6); }, 6);
    m.rope_local_theta = p.take([&] { return num_field(j, "rope_local_base_freq", 10000.0); }, 10000.0);
    p.check([&] { require_flag(j, "use_bidirectional_attention", false, "attention is causal in a training step"); });
  }
  if (f == Family::Gemma2 || f == Family::Gemma3) {
    const double q = p.take([&] { return num_field(j, "query_pre_attn_scalar", 0.0); }, 0.0);
    if (q > 0.0) m.attn_scale = 1.0 / std::sqrt(q);
    m.attn_softcap = p.take([&] { return num_field(j, "attn_logit_softcapping", 0.0); }, 0.0);
    m.final_softcap = p.take([&] { return num_field(j, "final_logit_softcapping", 0.0); }, 0.0);
  }
  // Dropout: the attention probabilities (attention_dropout); Phi-3 also its embedding
  // (embd_pdrop) and both residual branches (resid_pdrop).
  std::vector<DropoutField> drops;
  drops.push_back({"attention_dropout", p.take([&] { return num_field(j, "attention_dropout", 0.0); }, 0.0), kDropAttention});
  if (f == Family::Phi3) {
    drops.push_back({"embd_pdrop", p.take([&] { return num_field(j, "embd_pdrop", 0.0); }, 0.0), kDropEmbedding});
    drops.push_back({"resid_pdrop", p.take([&] { return num_field(j, "resid_pdrop", 0.0); }, 0.0), kDropResidual});
  }
  set_dropout(m, p, drops);
  if (f == Family::Mixtral || f == Family::Qwen3Moe || f == Family::Qwen2Moe) read_moe(j, m, p);
  if (f == Family::DeepseekV2 || f == Family::DeepseekV3) read_deepseek(j, m, p);
  if (f == Family::GptOss) read_gpt_oss(j, m, p);
  if (f == Family::Llama4) read_llama4(j, m, p);
  m.seq = std::min(m.positions, 1024);
  m.batch = 1;
  return m;
}

// no_rope_layers (SmolLM3's; Llama 4 writes it too): per layer 1 (rotates) or 0 (no RoPE), a
// list at least as long as the layers (the first ones count); absent or null, transformers'
// default: the layers l with (l + 1) % no_rope_layer_interval == 0 (default 4) go without. An
// empty list is refused (transformers keeps it, and its layers then find no entry). Layers
// without RoPE become layer kinds of their own (rope: false), the kinds the model has so far
// split by it.
std::vector<bool> rope_layers(const nlohmann::json& j, int layers, Problems& p, bool empty_is_default) {
  std::vector<bool> rope(static_cast<std::size_t>(std::max(layers, 0)), true);
  nlohmann::json list = j.contains("no_rope_layers") ? j.at("no_rope_layers") : nlohmann::json();
  if (empty_is_default && list.is_array() && list.empty()) list = nullptr;
  if (!list.is_null() && !(list.is_array() && !list.empty())) {
    p.add("no_rope_layers", "must be a list of 1 (RoPE) or 0 (none) per layer, got " + json_snippet(list));
    return {};
  }
  if (list.is_array()) {
    if (static_cast<int>(list.size()) < layers) {
      p.add("no_rope_layers", "lists " + std::to_string(list.size()) + " layers; num_hidden_layers is " + std::to_string(layers));
      return {};
    }
    for (std::size_t l = 0; l < rope.size(); ++l) {
      // 1 or 0 as transformers reads them (a truth value): also 1.0, 0.0, true, false.
      const nlohmann::json& v = list[l];
      const bool one = v.is_boolean() ? v.get<bool>() : v.is_number() && v.get<double>() == 1.0;
      const bool zero = v.is_boolean() ? !v.get<bool>() : v.is_number() && v.get<double>() == 0.0;
      if (!one && !zero) {
        p.add("no_rope_layers", "layer " + std::to_string(l) + " is " + json_snippet(v) + " (1: RoPE, 0: none)");
        return {};
      }
      rope[l] = one;
    }
  } else {
    const int every = p.take([&] { return int_field(j, "no_rope_layer_interval", 4); }, 4);
    for (int l = 0; l < layers; ++l) rope[static_cast<std::size_t>(l)] = (l + 1) % every != 0;
  }
  return rope;
}

void apply_no_rope_layers(const nlohmann::json& j, ModelConfig& m, Problems& p) {
  const std::vector<bool> rope = rope_layers(j, m.layers, p, false);
  if (std::all_of(rope.begin(), rope.end(), [](bool r) { return r; })) return;
  std::vector<LayerKind> kinds;
  std::vector<int> pattern;
  for (int l = 0; l < m.layers; ++l) {
    LayerKind k = m.layer_kinds.empty()
                      ? LayerKind{m.window_of(l) > 0 ? "sliding_attention" : "full_attention", m.window_of(l), m.rope_base_of(l)}
                      : m.kind_of(l);
    if (!rope[static_cast<std::size_t>(l)]) {
      k.name += "_no_rope";
      k.rope = false;
      k.rope_theta = 0.0;
    }
    auto at = std::find(kinds.begin(), kinds.end(), k);
    if (at == kinds.end()) at = kinds.insert(kinds.end(), k);
    pattern.push_back(static_cast<int>(at - kinds.begin()));
  }
  m.layer_kinds = std::move(kinds);
  m.layer_pattern = std::move(pattern);
  m.sliding_window = 0;  // the kinds give every layer's window and base
  m.window_layers = WindowLayers::All;
  m.window_pattern = 0;
  m.rope_local_theta = 0.0;
}

}  // namespace remat::hf
