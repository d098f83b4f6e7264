// Model files as `--model-file` reads them: our JSON format, or a Hugging Face config.json.
#include "core/model/model_config.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/targets.h"

namespace remat::fuzz {

void model_config(const std::uint8_t* data, std::size_t size) {
  static const std::string path = scratch_path("model.json");
  write_file(path, data, size);
  refused_or_accepted([] { load_model_file(path); });
}

}  // namespace remat::fuzz
