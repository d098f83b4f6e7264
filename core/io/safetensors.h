// Model weights in and out as safetensors, with the Hugging Face tensor names of each
// architecture (GPT-2 Conv1D weights transposed, Llama q|k|v and gate|up split). A model's
// weights as several files under an index are weight_files.h's.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/util/output_file.h"

namespace remat {

class ModelState;

struct SafeTensor {
  std::string dtype;  // F32, BF16, F16
  std::vector<std::int64_t> shape;
  std::vector<float> values;  // converted to fp32
};

// One tensor of a file's header: its dtype, shape and where its bytes lie in the data (the
// bytes after the header).
struct SafetensorsEntry {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;
};

// A file's header, checked: every entry's dtype, shape and offsets inside the file, no two
// entries' bytes overlapping. Nothing of the data is read.
struct SafetensorsHeader {
  std::string path;
  std::uint64_t file_size = 0;
  std::uint64_t data_start = 0;  // 8 + the header's length
  std::uint64_t header_hash = 0;  // of the first data_start bytes
  std::vector<SafetensorsEntry> entries;
  std::uint64_t data_bytes() const;  // the entries' bytes together
};

// Throws Error naming the file and the problem.
SafetensorsHeader read_safetensors_header(const std::string& path);
// The values of every entry of `h` (fp32), from the file `h` was read from, each byte once;
// throws Error naming the file if it is no longer the size it had.
std::map<std::string, SafeTensor> read_safetensors_data(const SafetensorsHeader& h);
// Reads every tensor of a file; throws Error naming the file and the problem.
std::map<std::string, SafeTensor> read_safetensors(const std::string& path);
// Writes fp32 tensors through an OutputFile (a temporary file renamed at the end; never over
// anything but a regular file that is none of `inputs`; `what` names the option in messages).
void write_safetensors(const std::string& path, const std::map<std::string, SafeTensor>& tensors,
                       const InputFiles& inputs = {}, const std::string& what = {});

// Where tensors were read from, as messages name it: `whole` is what was asked for
// ("safetensors file 'w.safetensors'", "weights index 'd/model.safetensors.index.json'"), named
// for a missing tensor; `file_of` names the file of each tensor where it is another.
struct TensorOrigin {
  std::string whole;
  std::map<std::string, std::string> file_of;
  static TensorOrigin file(const std::string& path);  // one safetensors file
  const std::string& of(const std::string& tensor) const;
};

class ParamLayout;
enum class Family : std::uint8_t;
// Checks tensor names and shapes (name → shape) against `layout`: every tensor it needs present
// with its shape, none that is not part of the model. Throws Error naming the tensor and its
// file (`origin`).
void check_hf_tensors(const std::map<std::string, std::vector<std::int64_t>>& shapes, const ParamLayout& layout,
                      Family family, const TensorOrigin& origin);

// Lays out tensors with Hugging Face names as the flat parameter vector of `layout` (fp32),
// after check_hf_tensors; `path` (or `origin`) is used in messages.
std::vector<float> flat_from_hf(const std::map<std::string, SafeTensor>& tensors, const ParamLayout& layout,
                                Family family, const TensorOrigin& origin);
std::vector<float> flat_from_hf(const std::map<std::string, SafeTensor>& tensors,
                                const ParamLayout& layout, Family family,
                                const std::string& path);

// The inverse of flat_from_hf: a flat fp32 vector laid out as `layout`, as tensors under their
// Hugging Face names and shapes, in the layout's order.
std::vector<std::pair<std::string, SafeTensor>> hf_tensors(const std::vector<float>& flat, const ParamLayout& layout);
// The same tensors' names and fp32 bytes, in the same order, without their values.
std::vector<std::pair<std::string, std::uint64_t>> hf_tensor_bytes(const ParamLayout& layout);
// hf_tensors, written as one file.
void write_flat_safetensors(const std::string& path, const std::vector<float>& flat, const ParamLayout& layout,
                            const InputFiles& inputs = {}, const std::string& what = {});

void load_safetensors(const std::string& path, ModelState& state);
void save_safetensors(const std::string& path, const ModelState& state, const InputFiles& inputs = {},
                      const std::string& what = {});
// The gradients of the last step, under the same names and shapes as the weights (F32).
void save_grads_safetensors(const std::string& path, const ModelState& state, const InputFiles& inputs = {},
                            const std::string& what = {});

}  // namespace remat
