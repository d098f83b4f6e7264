// Resolves what a user typed as a model: a preset name or a path to a JSON file.
#pragma once
#include <string>

#include "core/model/model_config.h"

namespace remat {

// Throws Error naming the unknown model and the presets there are.
ModelConfig resolve_model(const std::string& spec);

}  // namespace remat
