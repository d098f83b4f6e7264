#include "core/model/rope_scaling.h"

#include <cmath>

namespace remat {

RopeFrequencies rope_frequencies(const RopeScaling&, double theta, int rotary_dim, int, int) {
  RopeFrequencies f;
  for (int i = 0; i < rotary_dim / 2; ++i)
    f.inv_freq.push_back(1.0f / std::pow(static_cast<float>(theta),
                                          static_cast<float>(2 * i) / static_cast<float>(rotary_dim)));
  return f;
}

}  // namespace remat

#include <nlohmann/json.hpp>

namespace remat {

RopeScaling rope_scaling_from_json(const nlohmann::json& obj,
                                   std::vector<std::pair<std::string, std::string>>& problems) {
  if (!obj.is_null()) problems.emplace_back("rope_scaling", "not modelled yet");
  return {};
}

nlohmann::json rope_scaling_to_json(const RopeScaling&) { return nullptr; }

}  // namespace remat
