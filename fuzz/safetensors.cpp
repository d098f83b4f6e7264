// Weights as `run --load-weights` reads them: a safetensors file, or an index told by its
// content (JSON, not a safetensors header) whose weight_map names the shards of tiny_shards()
// beside it; then the tensors laid out for a tiny model by their Hugging Face names.
#include "core/io/weight_files.h"
#include "core/model/param_layout.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/targets.h"
#include "fuzz/tiny_run.h"

namespace remat::fuzz {

void safetensors(const std::uint8_t* data, std::size_t size) {
  static const std::string path = tiny_shards() + "/weights";
  static const ModelConfig model = tiny_model();
  static const ParamLayout layout(model);
  write_file(path, data, size);
  refused_or_accepted([] { weight_values(open_weight_files(path), layout, model.family); });
}

}  // namespace remat::fuzz
