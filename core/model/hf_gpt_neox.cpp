// Import of a Hugging Face GPT-NeoX config.json (Pythia, GPT-NeoX-20B): LayerNorms with biases,
// biases on every linear, a fused per-head query_key_value, partial rotary embeddings
// (rotary_pct of each head) and, with use_parallel_residual, the parallel block.
#include <algorithm>

#include "core/model/hf_fields.h"

namespace remat::hf {

namespace {

MlpKind neox_activation(const nlohmann::json& j) {
  const std::string act = string_field(j, "hidden_act", "gelu");
  if (act == "gelu") return MlpKind::Gelu;
  if (act == "gelu_new" || act == "gelu_pytorch_tanh") return MlpKind::GeluTanh;
  throw ConfigError("hidden_act", "'" + act + "' is not modelled (gelu: exact GELU; gelu_new, gelu_pytorch_tanh: tanh GELU)");
}

}  // namespace

ModelConfig gpt_neox_from_hf(const nlohmann::json& j, Problems& p, std::vector<std::string>& ignored) {
  sort_fields(j, {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                  "max_position_embeddings", "vocab_size", "layer_norm_eps", "hidden_act",
                  "rotary_pct", "partial_rotary_factor", "rotary_emb_base", "rope_theta",
                  "rope_scaling", "use_parallel_residual", "attention_bias", "attention_dropout",
                  "hidden_dropout", "tie_word_embeddings"},
              p, ignored);
  ModelConfig m;
  set_family(m, Family::GptNeox);
  m.layers = p.take([&] { return int_field(j, "num_hidden_layers"); }, 1);
  m.hidden = p.take([&] { return int_field(j, "hidden_size"); }, 1);
  m.heads = p.take([&] { return int_field(j, "num_attention_heads"); }, 1);
  m.kv_heads = m.heads;
  m.ffn = p.take([&] { return int_field(j, "intermediate_size"); }, 1);
  m.vocab = p.take([&] { return int_field(j, "vocab_size"); }, 1);
  m.positions = p.take([&] { return int_field(j, "max_position_embeddings"); }, 1);
  m.norm_eps = p.take([&] { return num_field(j, "layer_norm_eps", 1e-5); }, 1e-5);
  m.mlp = p.take([&] { return neox_activation(j); }, m.mlp);
  // The rotated share of each head: rotary_pct (transformers 4), partial_rotary_factor (5).
  const double pct = p.take([&] { return num_field(j, "rotary_pct", 0.25); }, 0.25);
  m.partial_rotary = p.take([&] { return num_field(j, "partial_rotary_factor", pct); }, pct);
  if (j.contains("rotary_pct") && j.contains("partial_rotary_factor") && m.partial_rotary != pct)
    p.add("partial_rotary_factor", "contradicts rotary_pct " + std::to_string(pct));
  const double base = p.take([&] { return num_field(j, "rotary_emb_base", 10000.0); }, 10000.0);
  m.rope_theta = p.take([&] { return num_field(j, "rope_theta", base); }, base);
  if (j.contains("rotary_emb_base") && j.contains("rope_theta") && m.rope_theta != base)
    p.add("rope_theta", "contradicts rotary_emb_base " + std::to_string(base));
  read_rope_scaling(m, p, j);
  const bool parallel = p.take([&] { return bool_field(j, "use_parallel_residual", true); }, true);
  m.block_layout = parallel ? BlockLayout::Parallel : BlockLayout::Sequential;
  const bool bias = p.take([&] { return bool_field(j, "attention_bias", true); }, true);
  m.qkv_bias = m.out_bias = bias;
  m.tied_embeddings = p.take([&] { return bool_field(j, "tie_word_embeddings", false); }, false);
  set_attention_hidden_dropout(m, p, j);
  m.seq = std::min(m.positions, 1024);
  m.batch = 1;
  return m;
}

}  // namespace remat::hf
