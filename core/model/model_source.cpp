#include "core/model/model_source.h"

#include <filesystem>

#include "core/util/error.h"
#include "core/util/paths.h"

namespace remat {

ModelConfig resolve_model(const std::string& spec) {
  std::error_code ec;
  bool looks_like_path = spec.find('/') != std::string::npos ||
                         (spec.size() > 5 && spec.substr(spec.size() - 5) == ".json");
  if (looks_like_path || std::filesystem::exists(spec, ec)) {
    if (!std::filesystem::exists(spec, ec)) throw Error("model file '" + spec + "' does not exist");
    return load_model_file(spec);
  }
  std::string p = preset_path(spec);
  if (p.empty()) {
    std::string known;
    for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown model '" + spec + "' (presets: " + known + "; or a path to a JSON file)");
  }
  ModelConfig m = load_model_file(p);
  m.name = spec;
  return m;
}

}  // namespace remat
