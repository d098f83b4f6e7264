#include "core/model/mla_config.h"

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/json_io.h"

namespace remat {

MlaConfig mla_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw ConfigError("mla", "must be an object ({\"kv_rank\": ..., \"nope_dim\": ...}), got " + json_snippet(j));
  MlaConfig m;
  for (const auto& [key, v] : j.items()) {
    const std::string f = "mla." + key;
    if (key == "q_rank") m.q_rank = json_int(v, f);
    else if (key == "kv_rank") m.kv_rank = json_int(v, f);
    else if (key == "nope_dim") m.nope_dim = json_int(v, f);
    else if (key == "rope_dim") m.rope_dim = json_int(v, f);
    else if (key == "v_dim") m.v_dim = json_int(v, f);
    else throw ConfigError(f, "unknown key (mla has q_rank, kv_rank, nope_dim, rope_dim, v_dim)");
  }
  for (const char* key : {"kv_rank", "nope_dim", "rope_dim", "v_dim"})
    if (!j.contains(key)) throw ConfigError(std::string("mla.") + key, "missing");
  return m;
}

nlohmann::json mla_to_json(const MlaConfig& m) {
  nlohmann::json j;
  if (m.q_rank > 0) j["q_rank"] = m.q_rank;
  j["kv_rank"] = m.kv_rank;
  j["nope_dim"] = m.nope_dim;
  j["rope_dim"] = m.rope_dim;
  j["v_dim"] = m.v_dim;
  return j;
}

void validate_mla(const MlaConfig& m, int hidden) {
  auto positive = [](const char* f, int v) {
    if (v <= 0) throw ConfigError(f, "must be a positive integer, got " + std::to_string(v));
  };
  positive("mla.kv_rank", m.kv_rank);
  positive("mla.rope_dim", m.rope_dim);
  positive("mla.v_dim", m.v_dim);
  if (m.nope_dim < 0) throw ConfigError("mla.nope_dim", "must be 0 or more, got " + std::to_string(m.nope_dim));
  if (m.q_rank < 0) throw ConfigError("mla.q_rank", "must be 0 (a plain q projection) or a rank, got " + std::to_string(m.q_rank));
  for (const auto& [f, v] : {std::pair<const char*, int>{"mla.nope_dim", m.nope_dim}, {"mla.rope_dim", m.rope_dim}, {"mla.v_dim", m.v_dim}})
    if (v > 65536) throw ConfigError(f, "at most 65536 dims a head are modelled, got " + std::to_string(v));
  if (m.rope_dim % 2 != 0) throw ConfigError("mla.rope_dim", "the rotated dims come in pairs: must be even, got " + std::to_string(m.rope_dim));
  if (m.kv_rank > hidden)
    throw ConfigError("mla.kv_rank", std::to_string(m.kv_rank) + " is larger than the hidden size " + std::to_string(hidden) +
                                         " (a latent is a compression of the hidden state)");
  if (m.q_rank > hidden)
    throw ConfigError("mla.q_rank", std::to_string(m.q_rank) + " is larger than the hidden size " + std::to_string(hidden));
}

std::string describe_mla(const MlaConfig& m, int heads) {
  return std::string(m.q_rank > 0 ? "q rank " + std::to_string(m.q_rank) : "plain q") + ", kv rank " +
         std::to_string(m.kv_rank) + "; " + std::to_string(heads) + " heads of " + std::to_string(m.nope_dim) + " + " +
         std::to_string(m.rope_dim) + " rotated (q, k; the rotated key part shared), values of " + std::to_string(m.v_dim);
}

}  // namespace remat
