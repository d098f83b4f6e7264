// Import of Hugging Face's gpt_oss configs' own fields (GptOssConfig, GptOssForCausalLM):
// - Attention: q/k/v/o biases (attention_bias, true by default), a learned sink logit per head
//   (attn_sinks, always), windows of sliding_window keys on the layers layer_types calls
//   sliding_attention (by default the even ones, 0, 2, ...), YaRN RoPE.
// - Experts on every layer, dropless: the router's logits with its bias, softmax over the top
//   num_experts_per_tok (= softmax over all experts, top-k renormalised), num_local_experts
//   experts of intermediate_size with biases, the clamped SwiGLU (swiglu_limit; its gain
//   swiglu_alpha is 1.702, the only one modelled); under output_router_logits the load-balancing
//   loss times router_aux_loss_coef.
// Absent fields take GptOssConfig's defaults (gpt_oss_defaults).
#include <algorithm>

#include "core/model/hf_fields.h"
#include "core/util/json_io.h"

namespace remat::hf {

std::set<std::string> gpt_oss_fields() {
  return {"sliding_window", "num_local_experts", "num_experts_per_tok", "swiglu_limit", "swiglu_alpha",
          "output_router_logits", "router_aux_loss_coef"};
}

void gpt_oss_defaults(nlohmann::json& j, bool rope_given) {
  const std::pair<const char*, nlohmann::json> defaults[] = {
      {"num_hidden_layers", 36},     {"hidden_size", 2880},        {"intermediate_size", 2880},
      {"num_attention_heads", 64},   {"vocab_size", 201088},       {"max_position_embeddings", 131072},
      {"num_key_value_heads", 8},    {"head_dim", 64},             {"rms_norm_eps", 1e-5},
      {"sliding_window", 128},       {"rope_theta", 150000.0},     {"attention_bias", true},
      {"tie_word_embeddings", false}, {"num_local_experts", 128},  {"num_experts_per_tok", 4},
      {"swiglu_limit", 7.0}};
  // GptOssConfig's other name for the experts' count.
  if (j.contains("num_experts") && !j.contains("num_local_experts")) {
    j["num_local_experts"] = j.at("num_experts");
    j.erase("num_experts");
  }
  // (rope_theta may be inside transformers 5's rope_parameters instead.)
  const bool theta_inside = j.contains("rope_parameters") && j.at("rope_parameters").is_object() &&
                            j.at("rope_parameters").contains("rope_theta");
  for (const auto& [key, v] : defaults)
    if (!j.contains(key) && !(theta_inside && std::string(key) == "rope_theta")) j[key] = v;
  // YaRN (factor 32 over 4096 positions, not truncated) unless the config says how it rotates.
  if (!rope_given)
    j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 32.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
                         {"original_max_position_embeddings", 4096}, {"truncate", false}};
}

void read_gpt_oss(const nlohmann::json& j, ModelConfig& m, Problems& p) {
  MoeConfig e;
  // A refused count (-1 here) is not compared with the other.
  e.experts = p.take([&] { return int_field(j, "num_local_experts"); }, -1);
  e.top_k = p.take([&] { return int_field(j, "num_experts_per_tok"); }, -1);
  if (e.experts > 0 && e.top_k > e.experts)
    p.add("num_experts_per_tok", std::to_string(e.top_k) + " is more than the " + std::to_string(e.experts) +
                                     " experts (num_local_experts)");
  e.experts = std::max(e.experts, 1);
  e.top_k = std::max(e.top_k, 1);
  e.ffn = m.ffn;  // intermediate_size: every layer's experts
  e.norm_topk = true;
  e.expert_bias = true;
  e.router_bias = true;
  m.moe = e;
  for (const char* key : {"swiglu_limit", "swiglu_alpha"})  // transformers refuses a null one too
    if (j.contains(key) && j.at(key).is_null()) p.add(key, "must be a number, got null");
  m.swiglu_limit = p.take([&] { return num_field(j, "swiglu_limit", 7.0); }, 7.0);
  p.check([&] {
    if (num_field(j, "swiglu_alpha", 1.702) != 1.702)
      throw ConfigError("swiglu_alpha", "the experts' gate is g * sigmoid(1.702 g); another gain (" +
                                            json_snippet(j.at("swiglu_alpha")) + ") is not modelled");
  });
  // The load-balancing loss joins the loss only under output_router_logits; its coefficient must be
  // given then (GptOssConfig's default changed from 0.9 to 0.001 between transformers versions).
  if (p.take([&] { return bool_field(j, "output_router_logits", false); }, false)) {
    if (!j.contains("router_aux_loss_coef") || j.at("router_aux_loss_coef").is_null())
      p.add("router_aux_loss_coef", "output_router_logits adds the load-balancing loss times this coefficient; give it "
                                    "(transformers' default differs between versions)");
    else
      m.moe.aux_loss_coef = aux_loss_coef(j, 0.9, p);
  } else {
    p.check([&] { num_field(j, "router_aux_loss_coef", 0.9); });  // read only with output_router_logits
  }
}

}  // namespace remat::hf
