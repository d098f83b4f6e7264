#include "core/model/moe_config.h"

#include <cmath>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/json_io.h"

namespace remat {

std::int64_t MoeConfig::capacity(std::int64_t tokens) const {
  if (capacity_factor <= 0.0 || experts <= 0) return 0;
  const long double per = static_cast<long double>(tokens) * top_k / experts;
  return static_cast<std::int64_t>(std::ceil(per * static_cast<long double>(capacity_factor)));
}

std::int64_t MoeConfig::rows(std::int64_t tokens) const {
  return capacity_factor > 0.0 ? capacity(tokens) * experts : tokens * top_k;
}

MoeConfig moe_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw ConfigError("moe", "must be an object ({\"experts\": ..., \"top_k\": ...}), got " + json_snippet(j));
  MoeConfig m;
  for (const auto& [key, v] : j.items()) {
    const std::string f = "moe." + key;
    if (key == "experts") {
      m.experts = json_int(v, f);
    } else if (key == "top_k") {
      m.top_k = json_int(v, f);
    } else if (key == "ffn") {
      m.ffn = json_int(v, f);
    } else if (key == "norm_topk") {
      m.norm_topk = json_bool(v, f);
    } else if (key == "capacity_factor") {
      m.capacity_factor = json_number(v, f);
      if (!(m.capacity_factor > 0.0) || !std::isfinite(m.capacity_factor))
        throw ConfigError(f, "must be a positive factor (leave it out for dropless routing), got " + json_snippet(v));
    } else if (key == "shared_ffn") {
      m.shared_ffn = json_int(v, f);
    } else if (key == "shared_gate") {
      m.shared_gate = json_bool(v, f);
    } else if (key == "expert_bias") {
      m.expert_bias = json_bool(v, f);
    } else if (key == "router_bias") {
      m.router_bias = json_bool(v, f);
    } else if (key == "aux_loss_coef") {
      m.aux_loss_coef = json_number(v, f);
    } else if (key == "score") {
      if (v != "softmax" && v != "sigmoid") throw ConfigError(f, "must be \"softmax\" or \"sigmoid\", got " + json_snippet(v));
      m.sigmoid = v == "sigmoid";
    } else if (key == "score_bias") {
      m.score_bias = json_bool(v, f);
    } else if (key == "groups") {
      m.groups = json_int(v, f);
    } else if (key == "topk_groups") {
      m.topk_groups = json_int(v, f);
    } else if (key == "group_score") {
      if (v != "top2_sum" && v != "max") throw ConfigError(f, "must be \"top2_sum\" or \"max\", got " + json_snippet(v));
      m.group_max = v == "max";
    } else if (key == "scaling") {
      m.scaling = json_number(v, f);
    } else if (key == "weights_on") {
      if (v != "output" && v != "input") throw ConfigError(f, "must be \"output\" or \"input\", got " + json_snippet(v));
      m.weight_input = v == "input";
    } else {
      throw ConfigError(f, "unknown key (moe has experts, top_k, ffn, norm_topk, capacity_factor, shared_ffn, "
                           "shared_gate, expert_bias, router_bias, aux_loss_coef, score, score_bias, groups, topk_groups, group_score, scaling, weights_on)");
    }
  }
  for (const char* key : {"experts", "top_k", "ffn"})
    if (!j.contains(key)) throw ConfigError(std::string("moe.") + key, "missing");
  validate_moe(m);
  return m;
}

nlohmann::json moe_to_json(const MoeConfig& m) {
  nlohmann::json j;
  j["experts"] = m.experts;
  j["top_k"] = m.top_k;
  j["ffn"] = m.ffn;
  if (m.norm_topk) j["norm_topk"] = true;
  if (m.capacity_factor != 0.0) j["capacity_factor"] = m.capacity_factor;
  if (m.shared_ffn != 0) j["shared_ffn"] = m.shared_ffn;
  if (m.shared_gate) j["shared_gate"] = true;
  if (m.expert_bias) j["expert_bias"] = true;
  if (m.router_bias) j["router_bias"] = true;
  if (m.aux_loss_coef != 0.0) j["aux_loss_coef"] = m.aux_loss_coef;
  if (m.sigmoid) j["score"] = "sigmoid";
  if (m.score_bias) j["score_bias"] = true;
  if (m.groups != 0) j["groups"] = m.groups;
  if (m.topk_groups != 0) j["topk_groups"] = m.topk_groups;
  if (m.group_max) j["group_score"] = "max";
  if (m.scaling != 1.0) j["scaling"] = m.scaling;
  if (m.weight_input) j["weights_on"] = "input";
  return j;
}

namespace {

std::string short_number(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

}  // namespace

void validate_moe(const MoeConfig& m) {
  if (m.experts <= 0) throw ConfigError("moe.experts", "must be a positive integer, got " + std::to_string(m.experts));
  if (m.top_k <= 0 || m.top_k > m.experts)
    throw ConfigError("moe.top_k", "must be between 1 and the " + std::to_string(m.experts) + " experts, got " +
                                       std::to_string(m.top_k));
  if (m.ffn <= 0) throw ConfigError("moe.ffn", "must be a positive integer, got " + std::to_string(m.ffn));
  if (m.groups > 64) throw ConfigError("moe.groups", "at most 64 groups are modelled, got " + std::to_string(m.groups));
  if (m.top_k > 64) throw ConfigError("moe.top_k", "at most 64 experts per token are modelled, got " + std::to_string(m.top_k));
  for (auto [key, v] : {std::pair{"moe.ffn", m.ffn}, std::pair{"moe.shared_ffn", m.shared_ffn}})
    if (v > (1 << 29)) throw ConfigError(key, "is more than 2^29 (" + std::to_string(v) + ")");
  if (m.groups < 0 || (m.groups > 0 && m.experts % m.groups != 0))
    throw ConfigError("moe.groups", std::to_string(m.groups) + " does not divide the " + std::to_string(m.experts) + " experts");
  if (m.groups > 1) {
    if (m.topk_groups < 1 || m.topk_groups > m.groups)
      throw ConfigError("moe.topk_groups", "must be between 1 and the " + std::to_string(m.groups) + " groups, got " +
                                               std::to_string(m.topk_groups));
    if (m.top_k > m.topk_groups * (m.experts / m.groups))
      throw ConfigError("moe.top_k", std::to_string(m.top_k) + " is more than the " +
                                         std::to_string(m.topk_groups * (m.experts / m.groups)) + " experts of " +
                                         std::to_string(m.topk_groups) + " groups");
  } else if (m.topk_groups != 0 && m.topk_groups != m.groups) {
    throw ConfigError("moe.topk_groups", "is given without groups");
  }
  if (!std::isfinite(m.scaling) || m.scaling <= 0.0)
    throw ConfigError("moe.scaling", "must be a positive factor, got " + std::to_string(m.scaling));
  if (m.shared_ffn < 0)
    throw ConfigError("moe.shared_ffn", "must be 0 (no shared experts) or a positive width, got " + std::to_string(m.shared_ffn));
  if (m.shared_gate && m.shared_ffn == 0)
    throw ConfigError("moe.shared_gate", "gates the shared experts, which this model has none of (shared_ffn 0)");
  if (!std::isfinite(m.aux_loss_coef) || m.aux_loss_coef < 0.0 || m.aux_loss_coef > 1e6)
    throw ConfigError("moe.aux_loss_coef", "must be 0 (no load-balancing loss) or a positive coefficient up to 1e6, got " +
                                               short_number(m.aux_loss_coef));
  if (m.aux_loss_coef > 0.0 && m.sigmoid)
    throw ConfigError("moe.aux_loss_coef", "the load-balancing loss is modelled for softmax routers (this one scores by sigmoid)");
  if (!std::isfinite(m.capacity_factor) || m.capacity_factor < 0.0)
    throw ConfigError("moe.capacity_factor", "must be 0 (dropless) or a positive factor, got " +
                                                 std::to_string(m.capacity_factor));
}

std::string describe_moe(const MoeConfig& m, std::int64_t tokens) {
  std::string s = std::to_string(m.experts) + " routed, top-" + std::to_string(m.top_k) + " by " +
                  (m.sigmoid ? "sigmoid" : "softmax") + (m.norm_topk ? ", renormalised" : "") +
                  (m.groups > 1 ? ", " + std::to_string(m.topk_groups) + " of " + std::to_string(m.groups) + " groups" +
                                       (m.group_max ? " (by their best)" : " (by their two best)") : "") +
                  (m.score_bias ? ", selection bias" : "") + (m.expert_bias ? ", experts with biases" : "") +
                  (m.router_bias ? ", router bias" : "") + (m.weight_input ? ", weights on the experts' input" : "") +
                  (m.aux_loss_coef > 0.0 ? ", load-balancing loss x " + short_number(m.aux_loss_coef) : "");
  if (m.scaling != 1.0) {
    std::string f = std::to_string(m.scaling);
    f.erase(f.find_last_not_of('0') + 1);
    if (!f.empty() && f.back() == '.') f.pop_back();
    s += ", weights x " + f;
  }
  if (m.shared_ffn > 0) s += "; shared experts of " + std::to_string(m.shared_ffn) + (m.shared_gate ? ", gated" : "");
  if (m.capacity_factor > 0.0)
    s += "; capacity " + std::to_string(m.capacity(tokens)) + " tokens per expert (" + std::to_string(m.rows(tokens)) +
         " rows per layer, padded; tokens beyond an expert's capacity are dropped)";
  else
    s += "; dropless: " + std::to_string(m.rows(tokens)) + " rows per layer whatever the routing";
  return s;
}

}  // namespace remat
