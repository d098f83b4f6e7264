// Safetensors weight files as `run --weights-in FILE` reads them: the file, then its tensors
// laid out for a tiny model by their Hugging Face names.
#include "core/io/safetensors.h"
#include "core/model/param_layout.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/targets.h"
#include "fuzz/tiny_run.h"

namespace remat::fuzz {

void safetensors(const std::uint8_t* data, std::size_t size) {
  static const std::string path = scratch_path("weights.safetensors");
  static const ModelConfig model = tiny_model();
  static const ParamLayout layout(model);
  write_file(path, data, size);
  refused_or_accepted([] { flat_from_hf(read_safetensors(path), layout, model.family, path); });
}

}  // namespace remat::fuzz
