// Import of Hugging Face's llama4_text configs' own fields (Llama4TextConfig, Llama4ForCausalLM):
// - Layers: those no_rope_layers marks 1 rotate (RoPE in the complex form, adjacent pairs) and
//   norm q and k per head without a weight (use_qk_norm); the others have no RoPE and, with
//   attn_temperature_tuning, scale q by log(floor((s + 1) / floor_scale) + 1) · attn_scale + 1.
//   layer_types says which attend within chunks of attention_chunk_size ("chunked_attention";
//   by default the layers with RoPE) and which to every earlier token ("full_attention"); a null
//   chunk with chunked layers is refused, as transformers fails on it.
// - Experts on the layers moe_layers lists (by default every interleave_moe_layer_step-th from
//   step - 1 on): the router's top num_experts_per_tok logits, each weight sigmoid(logit), the
//   token times its weight into each chosen expert (num_local_experts of intermediate_size,
//   gate|up in halves), the outputs summed, plus one shared expert of intermediate_size. The
//   other layers' MLP has intermediate_size_mlp.
// - No load-balancing loss: Llama4ForCausalLM adds none, so output_router_logits and
//   router_aux_loss_coef change nothing (listed as ignored), as router_jitter_noise, never read.
// Absent fields take Llama4TextConfig's defaults (llama4_defaults).
#include <algorithm>

#include "core/model/hf_fields.h"
#include "core/util/json_io.h"

namespace remat::hf {

std::set<std::string> llama4_fields() {
  return {"intermediate_size_mlp", "num_local_experts", "num_experts_per_tok", "moe_layers",
          "interleave_moe_layer_step", "use_qk_norm", "no_rope_layers", "no_rope_layer_interval",
          "attention_chunk_size", "attn_temperature_tuning", "floor_scale", "attn_scale", "layer_types"};
}

void llama4_defaults(nlohmann::json& j) {
  const std::pair<const char*, nlohmann::json> defaults[] = {
      {"vocab_size", 202048},          {"hidden_size", 5120},           {"intermediate_size", 8192},
      {"intermediate_size_mlp", 16384}, {"num_hidden_layers", 48},      {"num_attention_heads", 40},
      {"num_key_value_heads", 8},      {"head_dim", 128},               {"max_position_embeddings", 131072},
      {"rms_norm_eps", 1e-5},          {"rope_theta", 500000.0},        {"tie_word_embeddings", false},
      {"num_local_experts", 16},       {"num_experts_per_tok", 1},     {"attention_chunk_size", 8192}};
  // (rope_theta may be inside transformers 5's rope_parameters instead.)
  const bool theta_inside = j.contains("rope_parameters") && j.at("rope_parameters").is_object() &&
                            j.at("rope_parameters").contains("rope_theta");
  for (const auto& [key, v] : defaults)
    if (!j.contains(key) && !(theta_inside && std::string(key) == "rope_theta")) j[key] = v;
  // A null head_dim is hidden / heads, as a null num_key_value_heads is the heads (the shared reader's).
  if (j.at("head_dim").is_null()) j.erase("head_dim");
}

namespace {

// Per layer: whether it holds the experts (moe_layers, else every interleave_moe_layer_step-th).
std::vector<bool> moe_layers(const nlohmann::json& j, int layers, Problems& p) {
  std::vector<bool> moe(static_cast<std::size_t>(std::max(layers, 0)), false);
  if (j.contains("moe_layers") && !j.at("moe_layers").is_null()) {
    for (int l : layer_indices(j, "moe_layers", layers, p)) moe[static_cast<std::size_t>(l)] = true;
    return moe;
  }
  const int step = p.take([&] { return int_field(j, "interleave_moe_layer_step", 1); }, 1);
  for (int l = step - 1; l < layers; l += step) moe[static_cast<std::size_t>(l)] = true;
  return moe;
}

// Per layer: whether it attends within chunks (layer_types, else the layers with RoPE).
std::vector<bool> chunked_layers(const nlohmann::json& j, const std::vector<bool>& rope, Problems& p) {
  if (!j.contains("layer_types") || j.at("layer_types").is_null()) return rope;
  const nlohmann::json& lt = j.at("layer_types");
  if (!lt.is_array() || lt.size() != rope.size()) {
    p.add("layer_types", "must list one kind per layer (" + std::to_string(rope.size()) + "), got " + json_snippet(lt));
    return rope;
  }
  std::vector<bool> chunked(rope.size());
  for (std::size_t l = 0; l < lt.size(); ++l) {
    if (lt[l] != "chunked_attention" && lt[l] != "full_attention") {
      p.add("layer_types", "layer " + std::to_string(l) + " is " + json_snippet(lt[l]) +
                               " (known: chunked_attention, full_attention)");
      return rope;
    }
    chunked[l] = lt[l] == "chunked_attention";
  }
  return chunked;
}

}  // namespace

void read_llama4(const nlohmann::json& j, ModelConfig& m, Problems& p) {
  // intermediate_size is the experts' (routed and shared); the dense layers' MLP has its own.
  const int expert_ffn = m.ffn;
  m.ffn = p.take([&] { return int_field(j, "intermediate_size_mlp"); }, 1);
  if (!p.take([&] { return bool_field(j, "use_qk_norm", true); }, true)) m.qk_norm = QkNormKind::None;
  const std::vector<bool> rope = rope_layers(j, m.layers, p, true);
  if (rope.empty()) return;
  const std::vector<bool> sparse = moe_layers(j, m.layers, p);
  std::vector<bool> chunked = chunked_layers(j, rope, p);
  int chunk = 0;
  if (j.contains("attention_chunk_size") && !j.at("attention_chunk_size").is_null())
    chunk = p.take([&] { return int_field(j, "attention_chunk_size"); }, 0);
  else if (std::any_of(chunked.begin(), chunked.end(), [](bool c) { return c; }))
    p.add("attention_chunk_size", "is null, and layers attend in chunks (layer_types, by default those with RoPE): "
                                  "transformers fails there; give the chunk, or layer_types full_attention");
  // attn_temperature_tuning: a truth value (4 in the published configs, true in transformers 5).
  const nlohmann::json tuning = j.contains("attn_temperature_tuning") ? j.at("attn_temperature_tuning") : nlohmann::json(true);
  if (!tuning.is_boolean() && !tuning.is_number())
    p.add("attn_temperature_tuning", "must be true, false or a number, got " + json_snippet(tuning));
  const bool tuned = tuning.is_boolean() ? tuning.get<bool>() : tuning.is_number() && tuning.get<double>() != 0.0;
  const int floor_scale = p.take([&] { return int_field(j, "floor_scale", 8192); }, 8192);
  const double attn_scale = p.take([&] { return num_field(j, "attn_scale", 0.1); }, 0.1);
  if (tuned && !std::all_of(rope.begin(), rope.end(), [](bool r) { return r; })) {
    m.attn_temperature_floor = floor_scale;
    m.attn_temperature_scale = attn_scale;
  }

  MoeConfig e;
  e.experts = p.take([&] { return int_field(j, "num_local_experts"); }, 1);
  e.top_k = p.take([&] { return int_field(j, "num_experts_per_tok"); }, 1);
  if (e.top_k > e.experts)
    p.add("num_experts_per_tok", std::to_string(e.top_k) + " is more than the " + std::to_string(e.experts) +
                                     " experts (num_local_experts)");
  e.top_k = std::min(e.top_k, e.experts);
  e.ffn = expert_ffn;
  e.shared_ffn = expert_ffn;
  e.sigmoid = true;  // the top-k logits, each weight sigmoid(logit): no renormalisation, no scaling
  e.weight_input = true;
  const bool any_moe = std::any_of(sparse.begin(), sparse.end(), [](bool b) { return b; });
  m.moe = any_moe ? e : MoeConfig{};

  // One kind per (chunked, RoPE, experts) the layers have.
  std::vector<LayerKind> kinds;
  std::vector<int> pattern;
  for (int l = 0; l < m.layers; ++l) {
    const auto i = static_cast<std::size_t>(l);
    LayerKind k{chunked[i] && chunk > 0 ? "chunked_attention" : "full_attention"};
    if (chunked[i]) k.chunk = chunk;
    if (!rope[i]) {
      k.rope = false;
      k.name += "_no_rope";
    }
    if (sparse[i]) {
      k.mlp = LayerMlp::Moe;
      k.name += "+moe";
    } else if (any_moe) {
      k.name += "+dense_mlp";
    }
    auto at = std::find(kinds.begin(), kinds.end(), k);
    if (at == kinds.end()) at = kinds.insert(kinds.end(), k);
    pattern.push_back(static_cast<int>(at - kinds.begin()));
  }
  if (kinds.size() > 1 || kinds.front().chunk > 0 || !kinds.front().rope) {
    // The shortest period the layers repeat (Scout's four: three chunked, one without RoPE).
    std::size_t period = 1;
    auto repeats = [&](std::size_t p) {
      for (std::size_t b = p; b < pattern.size(); ++b)
        if (pattern[b] != pattern[b % p]) return false;
      return true;
    };
    while (!repeats(period)) ++period;
    pattern.resize(period);
    m.layer_kinds = std::move(kinds);
    m.layer_pattern = std::move(pattern);
  }
}

}  // namespace remat::hf
