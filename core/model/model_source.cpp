#include "core/model/model_source.h"

#include <filesystem>

#include "core/util/error.h"
#include "core/util/paths.h"

namespace remat {

ModelConfig resolve_model(const std::string& spec) {
  // A name is a preset; a file is named as a path (with a '/' or ending in .json), so a file in
  // the current directory never shadows a preset.
  std::error_code ec;
  bool looks_like_path = spec.find('/') != std::string::npos ||
                         (spec.size() > 5 && spec.substr(spec.size() - 5) == ".json");
  if (looks_like_path) {
    if (!std::filesystem::exists(spec, ec)) throw Error("model file '" + spec + "' does not exist");
    return load_model_file(spec);
  }
  std::string p = preset_path(spec);
  if (p.empty()) {
    std::string known;
    for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    std::string hint = std::filesystem::exists(spec, ec)
                           ? "; to load the file '" + spec + "' here, write './" + spec + "'"
                           : "; or a path to a JSON file";
    throw Error("unknown model '" + spec + "' (presets: " + known + hint + ")");
  }
  ModelConfig m = load_model_file(p);
  m.name = spec;
  return m;
}

}  // namespace remat
