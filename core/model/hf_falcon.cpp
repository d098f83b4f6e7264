// Import of a Hugging Face Falcon config.json (model_type falcon, or the first checkpoints'
// RefinedWebModel, 7B, and RefinedWeb, 40B): LayerNorms with biases, linears without (bias
// false), exact GELU, RoPE over whole heads, tied embeddings, and the blocks of its three
// layouts: the 7B's multi-query attention with both branches reading one norm; the
// new_decoder_architecture (40B, 180B) with kv groups and a norm per branch (ln_attn, ln_mlp);
// and, with parallel_attn false, a sequential block.
#include <algorithm>

#include "core/model/hf_fields.h"

namespace remat::hf {

namespace {

// RefinedWeb's names of the sizes, read as Falcon's.
const std::pair<const char*, const char*> kRefinedWebNames[] = {
    {"n_layer", "num_hidden_layers"}, {"n_head", "num_attention_heads"}, {"n_head_kv", "num_kv_heads"}};

// The first checkpoints' flag: true adds the norm's output, not its input, to the residual.
void require_residual_of_input(const nlohmann::json& j) {
  require_flag(j, "apply_residual_connection_post_layernorm", false,
               "the residual adds the block's input, not its norm's output");
}

}  // namespace

ModelConfig falcon_from_hf(const nlohmann::json& in, const std::string& type, Problems& p,
                           std::vector<std::string>& ignored) {
  nlohmann::json j = in;
  for (const auto& [old_name, name] : kRefinedWebNames)
    if (j.contains(old_name)) {
      if (j.contains(name) && j.at(name) != j.at(old_name))
        p.add(old_name, "contradicts " + std::string(name));
      j[name] = j.at(old_name);
      j.erase(old_name);
    }
  sort_fields(j, {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                  "num_kv_heads", "multi_query", "new_decoder_architecture", "parallel_attn", "bias",
                  "alibi", "layer_norm_epsilon", "hidden_dropout", "attention_dropout", "rope_theta",
                  "rope_scaling", "max_position_embeddings", "ffn_hidden_size", "activation",
                  "num_ln_in_parallel_attn", "tie_word_embeddings",
                  "apply_residual_connection_post_layernorm"},
              p, ignored);
  ModelConfig m;
  set_family(m, Family::Falcon);
  m.layers = p.take([&] { return int_field(j, "num_hidden_layers"); }, 1);
  m.hidden = p.take([&] { return int_field(j, "hidden_size"); }, 1);
  m.heads = p.take([&] { return int_field(j, "num_attention_heads"); }, 1);
  m.vocab = p.take([&] { return int_field(j, "vocab_size"); }, 1);
  m.positions = p.take([&] { return int_field(j, "max_position_embeddings", 2048); }, 2048);
  m.ffn = p.take([&] { return int_field(j, "ffn_hidden_size", 0); }, 0);
  if (m.ffn == 0) m.ffn = m.hidden > 0 && m.hidden <= (1 << 28) ? 4 * m.hidden : 1;
  m.norm_eps = p.take([&] { return num_field(j, "layer_norm_epsilon", 1e-5); }, 1e-5);
  m.rope_theta = p.take([&] { return num_field(j, "rope_theta", 10000.0); }, 10000.0);
  read_rope_scaling(m, p, j);
  const std::string act = p.take([&] { return string_field(j, "activation", "gelu"); }, std::string("gelu"));
  if (act != "gelu") p.add("activation", "'" + act + "' is not modelled (gelu: exact GELU)");
  p.check([&] { require_flag(j, "alibi", false, "ALiBi attention biases are not modelled; Falcon's RoPE is"); });
  p.check([&] { require_residual_of_input(j); });
  const bool bias = p.take([&] { return bool_field(j, "bias", false); }, false);
  m.qkv_bias = m.out_bias = m.mlp_bias = bias;
  // RefinedWeb is the new decoder architecture, RefinedWebModel the 7B's.
  const bool new_arch = p.take([&] { return bool_field(j, "new_decoder_architecture", type == "RefinedWeb"); },
                               type == "RefinedWeb");
  const bool multi_query = p.take([&] { return bool_field(j, "multi_query", true); }, true);
  const bool parallel = p.take([&] { return bool_field(j, "parallel_attn", true); }, true);
  if (new_arch) {
    m.kv_heads = p.take([&] { return int_field(j, "num_kv_heads", m.heads); }, m.heads);
    const int norms = p.take([&] { return int_field(j, "num_ln_in_parallel_attn", 2); }, 2);
    if (norms != 1 && norms != 2) p.add("num_ln_in_parallel_attn", "must be 1 or 2, got " + std::to_string(norms));
    m.block_layout = norms == 1 ? BlockLayout::ParallelSharedNorm : BlockLayout::Parallel;
  } else {
    m.kv_heads = multi_query ? 1 : m.heads;
    m.block_layout = parallel ? BlockLayout::ParallelSharedNorm : BlockLayout::Sequential;
    if (j.contains("num_kv_heads") && !j.at("num_kv_heads").is_null() &&
        p.take([&] { return int_field(j, "num_kv_heads"); }, m.kv_heads) != m.kv_heads)
      p.add("num_kv_heads", "is read only with new_decoder_architecture; multi_query gives " +
                                std::to_string(m.kv_heads) + " kv heads");
  }
  m.tied_embeddings = p.take([&] { return bool_field(j, "tie_word_embeddings", true); }, true);
  set_attention_hidden_dropout(m, p, j);
  m.seq = std::min(m.positions, 1024);
  m.batch = 1;
  return m;
}

}  // namespace remat::hf
