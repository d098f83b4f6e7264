// Model weights in and out as safetensors, with the Hugging Face tensor names of each
// architecture (GPT-2 Conv1D weights transposed, Llama q|k|v and gate|up split).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/util/output_file.h"

namespace remat {

class ModelState;

struct SafeTensor {
  std::string dtype;  // F32, BF16, F16
  std::vector<std::int64_t> shape;
  std::vector<float> values;  // converted to fp32
};

// Reads every tensor of a file; throws Error naming the file and the problem.
std::map<std::string, SafeTensor> read_safetensors(const std::string& path);
// Writes fp32 tensors through an OutputFile (a temporary file renamed at the end; never over
// anything but a regular file that is none of `inputs`; `what` names the option in messages).
void write_safetensors(const std::string& path, const std::map<std::string, SafeTensor>& tensors,
                       const InputFiles& inputs = {}, const std::string& what = {});

// Lays out tensors with Hugging Face names as the flat parameter vector of `layout` (fp32).
// Throws Error naming a missing, misshapen or unknown tensor; `path` is used in messages.
class ParamLayout;
enum class Family : std::uint8_t;
std::vector<float> flat_from_hf(const std::map<std::string, SafeTensor>& tensors,
                                const ParamLayout& layout, Family family,
                                const std::string& path);

// The inverse of flat_from_hf: a flat fp32 vector laid out as `layout`, written under its
// Hugging Face names and shapes.
void write_flat_safetensors(const std::string& path, const std::vector<float>& flat, const ParamLayout& layout,
                            const InputFiles& inputs = {}, const std::string& what = {});

void load_safetensors(const std::string& path, ModelState& state);
void save_safetensors(const std::string& path, const ModelState& state, const InputFiles& inputs = {},
                      const std::string& what = {});
// The gradients of the last step, under the same names and shapes as the weights (F32).
void save_grads_safetensors(const std::string& path, const ModelState& state, const InputFiles& inputs = {},
                            const std::string& what = {});

}  // namespace remat
