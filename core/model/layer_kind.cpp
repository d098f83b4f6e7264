#include "core/model/layer_kind.h"

#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/json_io.h"

namespace remat {

const char* to_string(LayerMlp m) { return m == LayerMlp::Moe ? "moe" : "dense"; }

std::vector<LayerKind> layer_kinds_from_json(const nlohmann::json& kinds) {
  if (!kinds.is_array() || kinds.empty())
    throw ConfigError("layer_kinds", "must be a list of layer kinds ({\"name\": ..., \"window\": ...}), got " +
                                         json_snippet(kinds));
  std::vector<LayerKind> out;
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    const nlohmann::json& k = kinds[i];
    const std::string field = "layer_kinds." + std::to_string(i);
    if (!k.is_object() || !k.contains("name") || !k.at("name").is_string())
      throw ConfigError(field, "must be an object with a \"name\", got " + json_snippet(k));
    LayerKind kind;
    kind.name = k.at("name").get<std::string>();
    for (const LayerKind& before : out)
      if (before.name == kind.name) throw ConfigError("layer_kinds." + kind.name, "is listed twice");
    for (const auto& [key, v] : k.items()) {
      const std::string f = "layer_kinds." + kind.name + "." + key;
      if (key == "name") continue;
      if (key == "window") {
        kind.window = json_int(v, f.c_str());
      } else if (key == "chunk") {
        kind.chunk = json_int(v, f.c_str());
      } else if (key == "rope_theta") {
        kind.rope_theta = json_number(v, f);
      } else if (key == "rope") {
        kind.rope = json_bool(v, f);
      } else if (key == "mlp") {
        if (v != "dense" && v != "moe") throw ConfigError(f, "must be \"dense\" or \"moe\", got " + json_snippet(v));
        kind.mlp = v == "moe" ? LayerMlp::Moe : LayerMlp::Dense;
      } else {
        throw ConfigError(f, "unknown key (a layer kind has name, window, chunk, rope_theta, rope, mlp)");
      }
    }
    out.push_back(std::move(kind));
  }
  return out;
}

std::vector<int> layer_pattern_from_json(const nlohmann::json& pattern, const std::vector<LayerKind>& kinds) {
  if (!pattern.is_array() || pattern.empty())
    throw ConfigError("layer_pattern", "must be a list of layer kind names, got " + json_snippet(pattern));
  std::vector<int> out;
  for (std::size_t b = 0; b < pattern.size(); ++b) {
    int index = -1;
    for (std::size_t i = 0; i < kinds.size(); ++i)
      if (pattern[b] == kinds[i].name) index = static_cast<int>(i);
    if (index < 0) {
      std::string known;
      for (const auto& k : kinds) known += (known.empty() ? "" : ", ") + k.name;
      throw ConfigError("layer_pattern", "entry " + std::to_string(b) + " is " + json_snippet(pattern[b]) +
                                             ", not a listed layer kind (" + known + ")");
    }
    out.push_back(index);
  }
  return out;
}

nlohmann::json layer_kinds_to_json(const std::vector<LayerKind>& kinds) {
  nlohmann::json out = nlohmann::json::array();
  for (const LayerKind& k : kinds) {
    nlohmann::json j;
    j["name"] = k.name;
    if (k.window != 0) j["window"] = k.window;
    if (k.chunk != 0) j["chunk"] = k.chunk;
    if (k.rope_theta != 0.0) j["rope_theta"] = k.rope_theta;
    if (!k.rope) j["rope"] = false;
    if (k.mlp != LayerMlp::Dense) j["mlp"] = to_string(k.mlp);
    out.push_back(std::move(j));
  }
  return out;
}

nlohmann::json layer_pattern_to_json(const std::vector<int>& pattern, const std::vector<LayerKind>& kinds) {
  nlohmann::json out = nlohmann::json::array();
  for (int i : pattern) out.push_back(kinds.at(static_cast<std::size_t>(i)).name);
  return out;
}

}  // namespace remat
