// RoPE frequencies (interim: default type only).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace remat {

enum class RopeType { Default, Linear, Dynamic, Llama3, Yarn, LongRope };

struct RopeScaling {
  RopeType type = RopeType::Default;
};

RopeScaling rope_scaling_from_json(const nlohmann::json& obj,
                                   std::vector<std::pair<std::string, std::string>>& problems);
nlohmann::json rope_scaling_to_json(const RopeScaling& s);

struct RopeFrequencies {
  std::vector<float> inv_freq;
  float attention_scaling = 1.0f;
};

RopeFrequencies rope_frequencies(const RopeScaling& s, double theta, int rotary_dim,
                                 int max_position_embeddings, int seq_len);

}  // namespace remat
