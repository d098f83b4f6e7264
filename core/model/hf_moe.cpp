// Import of the mixture-of-experts fields of Hugging Face's mixtral, qwen3_moe and qwen2_moe
// configs into MoeConfig (model/moe_config.h); Qwen2-MoE adds one shared expert of
// shared_expert_intermediate_size, its output times sigmoid(x · shared_expert_gate). Both route dropless (no capacity): softmax over the experts,
// the top num_experts_per_tok, renormalised always (Mixtral) or with norm_topk_prob (Qwen3-MoE).
// Qwen3-MoE's layer l is sparse unless listed in mlp_only_layers, and only where
// (l + 1) % decoder_sparse_step == 0; its dense layers have intermediate_size, its experts
// moe_intermediate_size. Mixtral's experts have intermediate_size.
#include <algorithm>

#include "core/model/hf_fields.h"
#include "core/util/json_io.h"

namespace remat::hf {

std::set<std::string> moe_fields(Family f) {
  std::set<std::string> s = {"num_experts_per_tok", "output_router_logits", "router_aux_loss_coef"};
  if (f == Family::Mixtral) {
    for (const char* k : {"num_local_experts", "router_jitter_noise", "sliding_window"}) s.insert(k);
  } else {
    for (const char* k : {"num_experts", "moe_intermediate_size", "norm_topk_prob", "decoder_sparse_step",
                          "mlp_only_layers", "sliding_window", "use_sliding_window", "max_window_layers"})
      s.insert(k);
    if (f == Family::Qwen2Moe) s.insert("shared_expert_intermediate_size");
  }
  return s;
}

namespace {

// The layers whose MLP is the mixture (Qwen3-MoE's decoder_sparse_step and mlp_only_layers).
std::vector<bool> sparse_layers(const nlohmann::json& j, int layers, Problems& p) {
  std::vector<bool> sparse(static_cast<std::size_t>(std::max(layers, 0)), true);
  const int step = p.take([&] { return int_field(j, "decoder_sparse_step", 1); }, 1);
  for (int l = 0; l < layers; ++l) sparse[static_cast<std::size_t>(l)] = (l + 1) % step == 0;
  if (!j.contains("mlp_only_layers") || j.at("mlp_only_layers").is_null()) return sparse;
  for (int l : layer_indices(j, "mlp_only_layers", layers, p)) sparse[static_cast<std::size_t>(l)] = false;
  return sparse;
}

}  // namespace

std::vector<int> layer_indices(const nlohmann::json& j, const char* key, int layers, Problems& p) {
  const nlohmann::json& list = j.at(key);
  if (!list.is_array()) {
    p.add(key, "must be a list of layer indices, got " + json_snippet(list));
    return {};
  }
  std::vector<int> out;
  for (const auto& v : list) {
    if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() >= layers) {
      p.add(key, "entry " + json_snippet(v) + " is not a layer index below num_hidden_layers " + std::to_string(layers));
      continue;
    }
    out.push_back(static_cast<int>(v.get<long long>()));
  }
  return out;
}

// Each layer's kind so far (or one plain kind) with its MLP set, named by it.
void apply_sparse_layers(ModelConfig& m, const std::vector<bool>& sparse) {
  if (std::all_of(sparse.begin(), sparse.end(), [](bool b) { return b; })) {
    for (LayerKind& k : m.layer_kinds) k.mlp = LayerMlp::Moe;  // kinds of attention (Qwen's windows): all sparse
    return;  // no kinds: every layer is
  }
  std::vector<LayerKind> kinds;
  std::vector<int> pattern;
  for (int l = 0; l < m.layers; ++l) {
    LayerKind k = m.layer_kinds.empty() ? LayerKind{"full_attention"} : m.kind_of(l);
    const bool moe = sparse[static_cast<std::size_t>(l)];
    k.mlp = moe ? LayerMlp::Moe : LayerMlp::Dense;
    k.name += moe ? "+moe" : "+dense_mlp";
    auto at = std::find(kinds.begin(), kinds.end(), k);
    if (at == kinds.end()) at = kinds.insert(kinds.end(), k);
    pattern.push_back(static_cast<int>(at - kinds.begin()));
  }
  m.layer_kinds = std::move(kinds);
  m.layer_pattern = std::move(pattern);
}

double aux_loss_coef(const nlohmann::json& j, double fallback, Problems& p) {
  if (j.contains("router_aux_loss_coef") && j.at("router_aux_loss_coef").is_null()) {
    p.add("router_aux_loss_coef", "output_router_logits adds the load-balancing loss times this coefficient; "
                                  "null is not one (transformers fails on it)");
    return 0.0;
  }
  const double c = p.take([&] { return num_field(j, "router_aux_loss_coef", fallback); }, 0.0);
  if (c >= 0.0 && c <= 1e6) return c;
  p.add("router_aux_loss_coef", "the load-balancing loss's coefficient must be between 0 and 1e6, got " +
                                    json_snippet(j.at("router_aux_loss_coef")));
  return 0.0;
}

void read_moe(const nlohmann::json& j, ModelConfig& m, Problems& p) {
  const bool mixtral = m.family == Family::Mixtral;
  MoeConfig e;
  const char* experts_key = mixtral ? "num_local_experts" : "num_experts";
  e.experts = p.take([&] { return int_field(j, experts_key); }, 1);
  e.top_k = p.take([&] { return int_field(j, "num_experts_per_tok"); }, 1);
  if (e.top_k > e.experts)
    p.add("num_experts_per_tok", std::to_string(e.top_k) + " is more than the " + std::to_string(e.experts) +
                                     " experts (" + experts_key + ")");
  e.ffn = mixtral ? m.ffn : p.take([&] { return int_field(j, "moe_intermediate_size"); }, 1);
  e.norm_topk = mixtral || p.take([&] { return bool_field(j, "norm_topk_prob", false); }, false);
  // The load-balancing loss joins the loss only under output_router_logits (transformers' rule).
  if (p.take([&] { return bool_field(j, "output_router_logits", false); }, false))
    e.aux_loss_coef = aux_loss_coef(j, 0.001, p);
  else
    p.check([&] { num_field(j, "router_aux_loss_coef", 0.0); });
  if (mixtral)
    p.check([&] {
      if (num_field(j, "router_jitter_noise", 0.0) != 0.0)
        throw ConfigError("router_jitter_noise", "noise on the router's input is not modelled (0: none)");
    });
  if (m.family == Family::Qwen2Moe) {  // one shared expert, gated by sigmoid(x · g)
    // transformers' versions window Qwen2-MoE's layers by different rules: not modelled.
    p.check([&] { require_flag(j, "use_sliding_window", false, "which Qwen2-MoE layers slide differs between transformers versions"); });
    e.shared_ffn = p.take([&] { return int_field(j, "shared_expert_intermediate_size"); }, 1);
    e.shared_gate = true;
  }
  m.moe = e;
  if (mixtral) return;
  const std::vector<bool> sparse = sparse_layers(j, m.layers, p);
  if (std::none_of(sparse.begin(), sparse.end(), [](bool b) { return b; })) {
    m.moe = MoeConfig{};  // every layer dense
    return;
  }
  if (m.sliding_window > 0 && m.layer_kinds.empty() && !std::all_of(sparse.begin(), sparse.end(), [](bool b) { return b; })) {
    p.add("mlp_only_layers", "dense layers among experts in a model with a sliding window on every layer are not modelled");
    return;
  }
  apply_sparse_layers(m, sparse);
}

}  // namespace remat::hf
