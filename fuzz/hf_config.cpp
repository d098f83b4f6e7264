// Hugging Face config.json import on its own: any JSON object with a model_type, as
// load_model_file hands it over, without the file around it.
#include <nlohmann/json.hpp>

#include "core/model/model_config.h"
#include "core/util/error.h"
#include "core/util/json_io.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/targets.h"

namespace remat::fuzz {

void hf_config(const std::uint8_t* data, std::size_t size) {
  // Parsed as every reader parses what a user hands it (bounded depth, core/util/json_io.h).
  nlohmann::json j;
  try {
    j = parse_json(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const Error&) {
    return;
  }
  if (!j.is_object() || !j.contains("model_type")) return;
  refused_or_accepted([&] { model_from_hf_json(j, "fuzz"); });
}

}  // namespace remat::fuzz
