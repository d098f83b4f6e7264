// The mixture-of-experts MLP of a model's MoE layers: how many routed experts, how many each
// token goes to, each expert's width, how the router's weights are taken, and whether experts
// have a fixed capacity. Described once here; the layers that have it are those whose kind says
// `mlp: moe` (every layer when the model lists no kinds and has experts).
//
// Routing (per token): scores = softmax(router logits) in fp32, the top-k experts by score
// (ties to the lower index), their scores renormalised to sum 1 when norm_topk, rounded to the
// model's dtype. Capacity factor c > 0: each expert holds at most C = ceil(tokens·k / experts · c)
// tokens, those with the highest scores (ties to the earlier token; Megatron-LM's drop policy
// "probs"), and its buffer is padded to C rows, so every buffer's size is fixed by the config.
// c = 0: dropless, every (token, expert) pair computed; the permuted buffer has tokens·k rows
// whatever the routing. Shared experts (shared_ffn > 0): one MLP of that width on every token,
// added to the routed experts' sum (times sigmoid of a one-column gate with shared_gate).
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace remat {

struct MoeConfig {
  int experts = 0;        // routed experts; 0: the model has no MoE layers
  int top_k = 0;          // experts per token
  int ffn = 0;            // each expert's intermediate size
  bool norm_topk = false; // renormalise the top-k scores to sum 1
  double capacity_factor = 0.0;  // 0: dropless
  int shared_ffn = 0;     // the shared experts' width (always on, every token; 0: none)
  bool shared_gate = false;  // the shared experts' output times sigmoid(x · g) (Qwen2-MoE)
  bool expert_bias = false;  // the routed experts' projections have biases (gpt-oss)
  bool router_bias = false;  // the router's logits add a trained bias per expert (gpt-oss)
  // > 0: the load-balancing loss (Switch Transformer's, as Hugging Face's Mixtral, Qwen-MoE and
  // gpt-oss add it under output_router_logits) times this coefficient joins the step's loss:
  // E · sum_e f_e · P_e over every MoE layer's tokens together, f_e the fraction of top-k
  // choices that went to expert e, P_e the mean softmax probability of e. Softmax routers only.
  double aux_loss_coef = 0.0;
  // The router (backend/moe_score.h): sigmoid scores instead of softmax, a selection bias per
  // expert (not trained), group-limited choice, a factor on the weights (DeepSeek-V3).
  bool sigmoid = false;
  bool score_bias = false;
  int groups = 0, topk_groups = 0;  // groups 0: no group limit
  bool group_max = false;  // a group's score: its best expert's (DeepSeek-V2), else its two best summed (V3)
  double scaling = 1.0;
  // Llama 4: each token's router weight multiplies its row into the expert (x · w), and the
  // experts' outputs are summed unweighted; otherwise the weight multiplies the expert's output.
  bool weight_input = false;
  bool operator==(const MoeConfig&) const = default;

  bool on() const { return experts > 0; }
  // Tokens an expert holds with a capacity factor (0 when dropless).
  std::int64_t capacity(std::int64_t tokens) const;
  // Rows of the permuted buffer (experts · capacity, or tokens · top_k when dropless).
  std::int64_t rows(std::int64_t tokens) const;
  // i32 entries of the routing table: per (token, choice) its expert and its row in the permuted
  // buffer (-1: dropped), then per expert its first row and its token count.
  std::int64_t routing_entries(std::int64_t tokens) const { return 2 * tokens * top_k + 2 * experts; }
};

// Our model JSON's "moe" object: {"experts", "top_k", "ffn", "norm_topk", "capacity_factor",
// "shared_ffn", "shared_gate", "expert_bias", "router_bias", "aux_loss_coef", "score" ("softmax" | "sigmoid"), "score_bias", "groups",
// "topk_groups", "group_score" ("top2_sum" | "max"), "scaling", "weights_on" ("output" | "input")}.
// ConfigError naming the key for anything else or a bad value.
MoeConfig moe_from_json(const nlohmann::json& j);
nlohmann::json moe_to_json(const MoeConfig& m);
// In words, for plan's summary: the router, and the routing assumption the prediction rests on
// (dropless: the permuted rows are tokens·k whatever the routing; capacity: C rows per expert,
// the tokens beyond it dropped), for a micro-batch of `tokens`.
std::string describe_moe(const MoeConfig& m, std::int64_t tokens);
// Throws ConfigError naming the field and the numbers.
void validate_moe(const MoeConfig& m);

}  // namespace remat
