// A model's weights as Hugging Face stores them: one safetensors file, or several (shards)
// under an index, `model.safetensors.index.json`, whose `weight_map` names the shard of each
// tensor (a file name relative to the index's directory) and whose `metadata.total_size`, where
// present, is the bytes of every tensor's data together. What `run --load-weights` reads (a
// file, an index, or a directory holding model.safetensors or model.safetensors.index.json) and
// `--save-weights` / `--save-grads` write (one file, or with a shard size a directory of shards
// and their index).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/io/safetensors.h"
#include "core/util/output_file.h"

namespace remat {

class ModelState;

inline constexpr const char* kWeightsFile = "model.safetensors";
inline constexpr const char* kWeightsIndexFile = "model.safetensors.index.json";

// The files holding a model's weights, their headers read and checked against each other.
struct WeightFiles {
  std::string index;                           // the index; empty for one safetensors file
  std::vector<SafetensorsHeader> files;        // the one file, or the shards
  std::map<std::string, std::size_t> file_of;  // each tensor's file in `files`
  // Messages name the file, or the index and each tensor's shard.
  TensorOrigin origin() const;
  std::map<std::string, std::vector<std::int64_t>> shapes() const;
  std::vector<std::string> paths() const;  // every file: the index, then the shards
};

// The files at `path`: a safetensors file; an index (a name ending in .json, or a file that is
// JSON rather than a safetensors header); or a directory holding one of model.safetensors and
// model.safetensors.index.json (both: refused as ambiguous). Of an index, every shard's header
// is read and checked against the weight_map and total_size: a shard that is missing, a
// tensor in two shards, a tensor of a shard the weight_map does not list or lists under
// another shard, a tensor the weight_map puts in a shard that does not hold it, a total_size
// other than the shards' data. No tensor data is read. Throws Error naming the file and field.
WeightFiles open_weight_files(const std::string& path);

// Checks every tensor's name and shape against `layout` from the headers (check_hf_tensors).
void check_weight_files(const WeightFiles& w, const ParamLayout& layout, Family family);

// Every tensor of the files (fp32), each file's data read once.
std::map<std::string, SafeTensor> read_weight_files(const WeightFiles& w);

// The flat fp32 parameters of `layout` from `w` (checked first), each file's data read once.
std::vector<float> weight_values(const WeightFiles& w, const ParamLayout& layout, Family family);

// open_weight_files(path), then weight_values, written into `state`.
void load_weights(const std::string& path, ModelState& state);

// Hugging Face's split of tensors into shards, in order: a tensor goes into the current shard
// unless that would take it past `max_bytes` (a tensor larger than that alone in one). Returns
// each tensor's shard (0, 1, ...).
std::vector<std::size_t> shard_tensors(const std::vector<std::uint64_t>& bytes, std::uint64_t max_bytes);
// "model-00001-of-00003.safetensors": shard i (from 0) of n.
std::string shard_file_name(std::size_t i, std::size_t n);
// The files a sharded save of `layout` writes into its directory: the shards, then the index.
std::vector<std::string> sharded_files(const ParamLayout& layout, std::uint64_t shard_bytes);

// Before anything runs, for a sharded save into `dir`: it is a directory, or nothing is there
// and its parent is a directory; it holds no model.safetensors (a directory with both is refused
// when read); and each file the save writes may be written (why_not_writable).
void check_sharded_output(const std::string& dir, const ParamLayout& layout, std::uint64_t shard_bytes,
                          const InputFiles& inputs, const std::string& what);

// Writes `flat` (laid out as `layout`) under the Hugging Face names: one safetensors file at
// `path` when shard_bytes is 0; else into the directory `path` (made if missing) shards of at
// most shard_bytes of data each where the tensors allow (shard_tensors), even when there is one,
// and then model.safetensors.index.json, each file through an OutputFile.
void write_weights(const std::string& path, const std::vector<float>& flat, const ParamLayout& layout,
                   std::uint64_t shard_bytes, const InputFiles& inputs = {}, const std::string& what = {});

}  // namespace remat
