// Test helpers for Hugging Face configs: a published file of tests/data/hf-configs as JSON, the
// message a config's import is refused with, and a file's model at a preset's settings.
#pragma once
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/model/model_config.h"
#include "core/util/error.h"

namespace remat::hftest {

inline nlohmann::json published(const std::string& file) {
  std::ifstream in(std::string(REMAT_TEST_DATA_DIR) + "/hf-configs/" + file);
  return nlohmann::json::parse(in);
}

// The import's refusal, or "" when it imports.
inline std::string refusal(const nlohmann::json& j) {
  try {
    model_from_hf_json(j, "x");
    return "";
  } catch (const ConfigError& e) {
    return e.what();
  }
}

// The model a published file imports as, at the preset's length, attention and dtype, in our
// JSON without its name: what the preset should be.
inline nlohmann::json at_preset_settings(ModelConfig file, const ModelConfig& preset) {
  file.seq = preset.seq;
  file.attention = preset.attention;
  file.dtype = preset.dtype;
  file.name = preset.name;
  return model_to_json(file);
}

}  // namespace remat::hftest
