// Import of Hugging Face's deepseek_v2 and deepseek_v3 configs' own fields: multi-head latent
// attention (model/mla_config.h) and their mixture of experts (model/moe_config.h).
// - Attention: q_lora_rank (null: a plain q projection), kv_lora_rank, qk_nope_head_dim,
//   qk_rope_head_dim, v_head_dim; the rotated pairs interleaved (rope_interleave true, the only
//   form transformers has for V2); scores scaled by (nope + rope)^-1/2, for V3 times mscale² with
//   YaRN's mscale_all_dim (mscale = 0.1 · mscale_all_dim · ln(factor) + 1), as transformers'
//   attention; the latents' norms with eps 1e-6.
// - Experts: layer l is sparse when n_routed_experts is set and l >= first_k_dense_replace
//   (moe_layer_freq 1: transformers reads no other); dense layers have intermediate_size, experts moe_intermediate_size,
//   n_shared_experts of them always on as one MLP n_shared_experts times as wide. V3 routes by
//   sigmoid scores with a selection bias (e_score_correction_bias) and topk_method noaux_tc: the
//   topk_group of n_group groups with the highest sums of their two best biased scores. V2 routes
//   by softmax, greedy or group_limited_greedy (a group's best score). Weights renormalised with
//   norm_topk_prob (V3; V2 never), then times routed_scaling_factor.
#include <algorithm>
#include <cmath>
#include <utility>

#include "core/model/hf_fields.h"
#include "core/util/json_io.h"

namespace remat::hf {

std::set<std::string> deepseek_fields() {
  return {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "rope_interleave",
          "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
          "first_k_dense_replace", "moe_layer_freq", "routed_scaling_factor", "topk_method", "n_group",
          "topk_group", "norm_topk_prob", "scoring_func"};
}

namespace {

// A size with transformers' default when the field is absent; null (where allowed) gives `null_value`.
int size_field(const nlohmann::json& j, const char* key, int fallback, Problems& p, bool zero_ok = false,
               int null_value = -1) {
  if (!j.contains(key)) return fallback;
  if (j.at(key).is_null() && null_value >= 0) return null_value;
  return p.take([&] {
    const int v = json_int(j.at(key), key);
    if (v < (zero_ok ? 0 : 1)) throw ConfigError(key, std::string("must be a ") + (zero_ok ? "non-negative" : "positive") +
                                                          " integer, got " + std::to_string(v));
    return v;
  }, fallback);
}

void read_latent_attention(const nlohmann::json& j, ModelConfig& m, Problems& p) {
  MlaConfig a;
  // transformers' defaults for absent fields (both versions); q_lora_rank null: a plain q projection.
  a.q_rank = size_field(j, "q_lora_rank", 1536, p, false, 0);
  a.kv_rank = size_field(j, "kv_lora_rank", 512, p);
  a.nope_dim = size_field(j, "qk_nope_head_dim", 128, p, true);
  a.rope_dim = size_field(j, "qk_rope_head_dim", 64, p);
  a.v_dim = size_field(j, "v_head_dim", 128, p);
  p.check([&] { require_flag(j, "rope_interleave", true, "rotating the two halves of the rope dims (false) is not modelled"); });
  if (a.rope_dim % 2 != 0) p.add("qk_rope_head_dim", "the rotated dims come in pairs: must be even, got " + std::to_string(a.rope_dim));
  if (a.q_rank > m.hidden)
    p.add("q_lora_rank", std::to_string(a.q_rank) + (j.contains("q_lora_rank") ? "" : " (transformers' default; the file has none)") +
                             " is larger than the hidden size " + std::to_string(m.hidden));
  for (const auto& [f, v] : {std::pair<const char*, int>{"qk_nope_head_dim", a.nope_dim}, {"qk_rope_head_dim", a.rope_dim},
                             {"v_head_dim", a.v_dim}})
    if (v > 65536) p.add(f, "at most 65536 dims a head are modelled, got " + std::to_string(v));
  if (a.kv_rank > m.hidden)
    p.add("kv_lora_rank", std::to_string(a.kv_rank) + " is larger than the hidden size " + std::to_string(m.hidden));
  m.mla = a;
  m.head_size = 0;  // transformers writes head_dim = qk_rope_head_dim; the heads are nope + rope wide
  // The latents' norms take RMSNorm's default eps (1e-6) in transformers, whatever rms_norm_eps says.
  if (m.norm_eps != 1e-6)
    p.add("rms_norm_eps", "the latent norms' eps is 1e-6 in transformers' DeepSeek; another rms_norm_eps (" +
                              json_snippet(j.at("rms_norm_eps")) + ") is not modelled");
  double scale = 1.0 / std::sqrt(static_cast<double>(std::max(a.qk_dim(), 1)));
  const RopeScaling& rs = m.rope_scaling;
  if (m.family == Family::DeepseekV3 && rs.type == RopeType::Yarn && rs.mscale_all_dim.value_or(0.0) != 0.0 && rs.factor.value_or(1.0) > 1.0) {
    const double ms = 0.1 * *rs.mscale_all_dim * std::log(*rs.factor) + 1.0;
    scale *= ms * ms;
  }
  m.attn_scale = scale;
}

void read_experts(const nlohmann::json& j, ModelConfig& m, Problems& p) {
  const bool v3 = m.family == Family::DeepseekV3;
  // transformers' defaults where a field is absent (V3: 256 experts, V2: 64); null: every layer
  // dense (DeepSeek's own V2 code reads it so).
  const int experts = size_field(j, "n_routed_experts", v3 ? 256 : 64, p, false, 0);
  if (experts == 0) return;
  MoeConfig e;
  e.experts = experts;
  e.top_k = v3 ? size_field(j, "num_experts_per_tok", 8, p) : p.take([&] { return int_field(j, "num_experts_per_tok"); }, 1);
  if (e.top_k > e.experts)
    p.add("num_experts_per_tok", std::to_string(e.top_k) + " is more than the " + std::to_string(e.experts) +
                                     " experts (n_routed_experts)");
  e.ffn = size_field(j, "moe_intermediate_size", v3 ? 2048 : 1407, p);
  const int shared = size_field(j, "n_shared_experts", v3 ? 1 : 2, p, true);
  e.shared_ffn = shared * e.ffn;
  // Absent: transformers' default; null: falsy, as transformers' `if norm_topk_prob` reads it.
  e.norm_topk = j.contains("norm_topk_prob") && j.at("norm_topk_prob").is_null()
                    ? false
                    : p.take([&] { return bool_field(j, "norm_topk_prob", v3); }, v3);
  if (!v3 && e.norm_topk)
    p.add("norm_topk_prob", "transformers' DeepSeek-V2 never renormalises the top-k weights (it scales them by "
                            "routed_scaling_factor); true is not modelled");
  if (j.contains("routed_scaling_factor") && j.at("routed_scaling_factor").is_null())
    p.add("routed_scaling_factor", "null: transformers multiplies the weights by it; give a number");
  e.scaling = p.take([&] { return num_field(j, "routed_scaling_factor", v3 ? 2.5 : 1.0); }, 1.0);
  const std::string score = p.take([&] { return string_field(j, "scoring_func", v3 ? "sigmoid" : "softmax"); }, std::string());
  if (score != (v3 ? "sigmoid" : "softmax"))
    p.add("scoring_func", "'" + score + "' is not modelled for " + to_string(m.family) + " (" + (v3 ? "sigmoid" : "softmax") + ")");
  e.sigmoid = v3;
  e.score_bias = v3;
  const std::string method = p.take([&] { return string_field(j, "topk_method", v3 ? "noaux_tc" : "greedy"); }, std::string());
  const bool grouped = v3 ? method == "noaux_tc" : method == "group_limited_greedy";
  if (v3 ? method != "noaux_tc" : method != "greedy" && method != "group_limited_greedy")
    p.add("topk_method", "'" + method + "' is not modelled for " + to_string(m.family) +
                             (v3 ? " (noaux_tc)" : " (greedy, group_limited_greedy)"));
  if (grouped) {
    e.groups = size_field(j, "n_group", v3 ? 8 : 1, p, false, v3 ? -1 : 1);
    e.topk_groups = size_field(j, "topk_group", v3 ? 4 : 1, p, false, v3 ? -1 : 1);
    if (e.groups > 0 && e.experts % e.groups != 0)
      p.add("n_group", std::to_string(e.groups) + " does not divide the " + std::to_string(e.experts) + " experts (n_routed_experts)");
    else if (v3 && e.groups > 0 && e.experts / e.groups < 2)
      p.add("n_group", std::to_string(e.groups) + " groups of " + std::to_string(e.experts / e.groups) +
                           " expert: transformers scores a group by its two best");
    e.group_max = !v3;
    if (e.groups <= 1) e.groups = e.topk_groups = 0;  // one group: no limit
  }
  p.check([&] { validate_moe(e); });
  m.moe = e;
  const int first = size_field(j, "first_k_dense_replace", v3 ? 3 : 0, p, true);
  // transformers makes every layer from first_k_dense_replace on sparse; it does not read moe_layer_freq.
  if (p.take([&] { return int_field(j, "moe_layer_freq", 1); }, 1) != 1)
    p.add("moe_layer_freq", "transformers' DeepSeek does not read it (every layer from first_k_dense_replace on has "
                            "the experts); a value other than 1 is not modelled");
  std::vector<bool> sparse(static_cast<std::size_t>(std::max(m.layers, 0)));
  for (int l = 0; l < m.layers; ++l) sparse[static_cast<std::size_t>(l)] = l >= first;
  if (std::none_of(sparse.begin(), sparse.end(), [](bool b) { return b; })) {
    m.moe = MoeConfig{};
    return;
  }
  apply_sparse_layers(m, sparse);
}

}  // namespace

void read_deepseek(const nlohmann::json& j, ModelConfig& m, Problems& p) {
  read_latent_attention(j, m, p);
  read_experts(j, m, p);
}

}  // namespace remat::hf
