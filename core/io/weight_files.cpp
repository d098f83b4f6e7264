#include "core/io/weight_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "core/engine/model_state.h"
#include "core/io/hf_tensor_names.h"
#include "core/util/error.h"
#include "core/util/json_io.h"
#include "core/util/limits.h"

namespace remat {

namespace fs = std::filesystem;

namespace {

std::string q(const std::string& s) { return "'" + s + "'"; }

// An index by its name (.json), or by its first bytes: a safetensors file begins with its
// header's length (8 bytes, little-endian, within the file) and the header's '{'; JSON text with
// '{' after white space, whose bytes as such a length would be far past any file's size.
bool is_index(const std::string& path) {
  if (path.ends_with(".json")) return true;
  struct stat st{};
  const int fd = open_regular_file(path, st);
  unsigned char b[64];
  const ssize_t n = ::read(fd, b, sizeof b);
  ::close(fd);
  if (n <= 0) return false;
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (n >= 9) {
    std::uint64_t len = 0;
    for (int i = 7; i >= 0; --i) len = (len << 8) | b[i];
    if (b[8] == '{' && len <= size - 8) return false;
  }
  for (ssize_t i = 0; i < n; ++i) {
    if (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') continue;
    return b[i] == '{';
  }
  return false;
}

// What `path` names: a file, or the one weights file of a directory.
std::string resolve(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return path;  // the file's reader says why not
  const fs::path one = fs::path(path) / kWeightsFile, index = fs::path(path) / kWeightsIndexFile;
  std::error_code ec;
  const bool has_one = fs::exists(one, ec), has_index = fs::exists(index, ec);
  if (has_one && has_index)
    throw Error("weights directory " + q(path) + " holds both " + kWeightsFile + " and " + kWeightsIndexFile +
                ": name the one to load");
  if (!has_one && !has_index)
    throw Error("weights directory " + q(path) + " holds neither " + kWeightsFile + " nor " + kWeightsIndexFile);
  return (has_one ? one : index).string();
}

// A weight_map value: a file name relative to the index's directory, inside it.
std::string shard_name(const std::string& index, const std::string& tensor, const nlohmann::json& v) {
  const std::string where = "weights index " + q(index) + ": weight_map[" + q(tensor) + "]";
  if (!v.is_string()) throw Error(where + " must be a shard's file name, got " + json_snippet(v));
  const fs::path p(v.get<std::string>());
  if (p.empty() || p.is_absolute() || !p.has_filename())
    throw Error(where + " must name a file relative to the index's directory, got " + json_snippet(v));
  for (const auto& part : p)
    if (part == "..") throw Error(where + " names a file outside the index's directory: " + json_snippet(v));
  return p.lexically_normal().string();
}

// metadata.total_size, where present: the bytes of every tensor's data.
std::optional<std::uint64_t> total_size(const std::string& index, const nlohmann::json& j) {
  auto m = j.find("metadata");
  if (m == j.end() || m->is_null()) return std::nullopt;
  if (!m->is_object()) throw Error("weights index " + q(index) + ": metadata must be an object, got " + json_snippet(*m));
  auto t = m->find("total_size");
  if (t == m->end() || t->is_null()) return std::nullopt;
  if (t->is_number_unsigned()) return t->get<std::uint64_t>();
  if (t->is_number_float()) {
    const double d = t->get<double>();
    if (d >= 0 && d < 1.8e19 && std::floor(d) == d) return static_cast<std::uint64_t>(d);
  }
  throw Error("weights index " + q(index) + ": metadata.total_size must be a whole number of bytes, got " +
              json_snippet(*t));
}

WeightFiles open_index(const std::string& index) {
  const std::string where = "weights index " + q(index);
  const nlohmann::json j = parse_json(read_regular_file(index, limits::kJsonFileBytes), where);
  if (!j.is_object()) throw Error(where + ": not a JSON object (" + json_snippet(j) + ")");
  auto wm = j.find("weight_map");
  if (wm == j.end())
    throw Error(where + ": no \"weight_map\" (an index maps each tensor name to its shard file, as Hugging Face's " +
                kWeightsIndexFile + " does)");
  if (!wm->is_object() || wm->empty())
    throw Error(where + ": weight_map must be an object naming each tensor's shard file, got " + json_snippet(*wm));
  const std::optional<std::uint64_t> total = total_size(index, j);

  // The shards by their names in the weight_map, each with the tensors it is said to hold.
  std::map<std::string, std::vector<std::string>> listed;
  std::map<std::string, std::string> shard_of;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    const std::string s = shard_name(index, it.key(), it.value());
    listed[s].push_back(it.key());
    shard_of[it.key()] = s;
  }
  const fs::path dir = fs::path(index).parent_path();
  WeightFiles w;
  w.index = index;
  std::vector<std::string> names;
  for (const auto& [s, tensors] : listed) {
    const std::string path = (dir / s).string();
    std::error_code ec;
    if (!fs::exists(path, ec))
      throw Error(where + ": shard " + q(s) + " (of " + std::to_string(tensors.size()) + " tensor" +
                  (tensors.size() == 1 ? "" : "s") + ", e.g. " + q(tensors.front()) + ") is missing: " + q(path) +
                  " is not there");
    names.push_back(s);
  }
  for (std::size_t k = 0; k < names.size(); ++k) {
    const std::string path = (dir / names[k]).string();
    try {
      w.files.push_back(read_safetensors_header(path));
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (a shard of " + q(index) + ")");
    }
  }
  // One tensor, one shard: in the headers, and where the weight_map says.
  for (std::size_t k = 0; k < w.files.size(); ++k)
    for (const auto& e : w.files[k].entries) {
      auto [it, fresh] = w.file_of.emplace(e.name, k);
      if (!fresh)
        throw Error(where + ": tensor " + q(e.name) + " is in two shards, " + q(names[it->second]) + " and " +
                    q(names[k]) + "; each tensor must be in one");
    }
  for (std::size_t k = 0; k < w.files.size(); ++k)
    for (const auto& e : w.files[k].entries) {
      auto s = shard_of.find(e.name);
      if (s == shard_of.end())
        throw Error(where + ": shard " + q(names[k]) + " holds tensor " + q(e.name) +
                    ", which the weight_map does not list");
      if (s->second != names[k])
        throw Error(where + ": shard " + q(names[k]) + " holds tensor " + q(e.name) + ", which the weight_map puts in " +
                    q(s->second));
    }
  for (const auto& [tensor, s] : shard_of)
    if (!w.file_of.count(tensor))
      throw Error(where + ": the weight_map puts tensor " + q(tensor) + " in shard " + q(s) + ", which does not hold it");
  if (total) {
    std::uint64_t data = 0;
    for (const auto& f : w.files) data += f.data_bytes();
    if (*total != data)
      throw Error(where + ": metadata.total_size is " + std::to_string(*total) + " bytes, but the shards' tensors hold " +
                  std::to_string(data));
  }
  return w;
}

}  // namespace

TensorOrigin WeightFiles::origin() const {
  if (index.empty()) return TensorOrigin::file(files.at(0).path);
  TensorOrigin o{"weights index " + q(index), {}};
  for (const auto& [tensor, k] : file_of)
    o.file_of[tensor] = "safetensors file " + q(files[k].path) + " (a shard of " + q(index) + ")";
  return o;
}

std::map<std::string, std::vector<std::int64_t>> WeightFiles::shapes() const {
  std::map<std::string, std::vector<std::int64_t>> out;
  for (const auto& f : files)
    for (const auto& e : f.entries) out.emplace(e.name, e.shape);
  return out;
}

std::vector<std::string> WeightFiles::paths() const {
  std::vector<std::string> out;
  if (!index.empty()) out.push_back(index);
  for (const auto& f : files) out.push_back(f.path);
  return out;
}

WeightFiles open_weight_files(const std::string& path) {
  const std::string file = resolve(path);
  if (is_index(file)) return open_index(file);
  WeightFiles w;
  w.files.push_back(read_safetensors_header(file));
  for (const auto& e : w.files[0].entries) w.file_of.emplace(e.name, 0);
  return w;
}

void check_weight_files(const WeightFiles& w, const ParamLayout& layout, Family family) {
  check_hf_tensors(w.shapes(), layout, family, w.origin());
}

std::map<std::string, SafeTensor> read_weight_files(const WeightFiles& w) {
  std::map<std::string, SafeTensor> all;
  for (const auto& f : w.files) all.merge(read_safetensors_data(f));
  return all;
}

std::vector<float> weight_values(const WeightFiles& w, const ParamLayout& layout, Family family) {
  const TensorOrigin origin = w.origin();
  check_hf_tensors(w.shapes(), layout, family, origin);
  // Only the step's tensors are read (not a multimodal checkpoint's vision tower); a shard that
  // holds none of them is not opened again.
  const HfTensorNames names(family, layout.lm_head < 0);
  WeightFiles taken = w;
  for (auto& f : taken.files)
    f.entries.erase(std::remove_if(f.entries.begin(), f.entries.end(),
                                   [&](const SafetensorsEntry& e) { return names.skipped(e.name); }),
                    f.entries.end());
  taken.files.erase(std::remove_if(taken.files.begin(), taken.files.end(),
                                   [](const SafetensorsHeader& f) { return f.entries.empty(); }),
                    taken.files.end());
  return flat_from_hf(read_weight_files(taken), layout, family, origin);
}

void load_weights(const std::string& path, ModelState& state) {
  state.write_params(weight_values(open_weight_files(path), state.layout(), state.config().family));
}

std::vector<std::size_t> shard_tensors(const std::vector<std::uint64_t>& bytes, std::uint64_t max_bytes) {
  std::vector<std::size_t> out;
  std::size_t shard = 0;
  std::uint64_t held = 0;
  for (std::uint64_t b : bytes) {
    if (held > 0 && (b > max_bytes || held > max_bytes - b)) {
      ++shard;
      held = 0;
    }
    out.push_back(shard);
    held += b;
  }
  return out;
}

std::string shard_file_name(std::size_t i, std::size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

std::vector<std::string> sharded_files(const ParamLayout& layout, std::uint64_t shard_bytes) {
  std::vector<std::uint64_t> bytes;
  for (const auto& [name, b] : hf_tensor_bytes(layout)) bytes.push_back(b);
  const std::vector<std::size_t> shard = shard_tensors(bytes, shard_bytes);
  const std::size_t n = shard.empty() ? 0 : shard.back() + 1;
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(shard_file_name(i, n));
  out.emplace_back(kWeightsIndexFile);
  return out;
}

void check_sharded_output(const std::string& dir, const ParamLayout& layout, std::uint64_t shard_bytes,
                          const InputFiles& inputs, const std::string& what) {
  const std::string who = (what.empty() ? std::string("sharded weights") : what) + " " + q(dir);
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st))
      throw Error(who + " is not a directory (sharded weights, --save-shard-size, are written into one)");
    if (fs::exists(fs::path(dir) / kWeightsFile, ec))
      throw Error(who + " holds " + kWeightsFile + "; shards and their index beside it would make the directory "
                  "ambiguous to load (remove it, or name another directory)");
  } else {
    const fs::path parent = fs::path(dir).parent_path().empty() ? fs::path(".") : fs::path(dir).parent_path();
    if (!fs::is_directory(parent, ec)) throw Error(who + ": no directory " + q(parent.string()) + " to make it in");
  }
  for (const auto& f : sharded_files(layout, shard_bytes))
    if (std::string why = why_not_writable((fs::path(dir) / f).string(), inputs, what); !why.empty()) throw Error(why);
}

void write_weights(const std::string& path, const std::vector<float>& flat, const ParamLayout& layout,
                   std::uint64_t shard_bytes, const InputFiles& inputs, const std::string& what) {
  if (shard_bytes == 0) return write_flat_safetensors(path, flat, layout, inputs, what);
  if (static_cast<std::int64_t>(flat.size()) != layout.total())
    throw Error("cannot write '" + path + "': " + std::to_string(flat.size()) + " values, the model has " +
                std::to_string(layout.total()));
  if (::mkdir(path.c_str(), 0777) != 0 && errno != EEXIST)
    throw Error("cannot make the directory " + q(path) + ": " + std::strerror(errno));
  std::vector<std::pair<std::string, SafeTensor>> tensors = hf_tensors(flat, layout);
  std::vector<std::uint64_t> bytes;
  for (const auto& [name, t] : tensors) bytes.push_back(t.values.size() * sizeof(float));
  const std::vector<std::size_t> shard = shard_tensors(bytes, shard_bytes);
  const std::size_t n = shard.empty() ? 0 : shard.back() + 1;
  nlohmann::json map = nlohmann::json::object();
  std::uint64_t total = 0;
  for (std::size_t i = 0, k = 0; i < n; ++i) {
    const std::string file = shard_file_name(i, n);
    std::map<std::string, SafeTensor> part;
    for (; k < tensors.size() && shard[k] == i; ++k) {
      map[tensors[k].first] = file;
      total += bytes[k];
      part.emplace(std::move(tensors[k].first), std::move(tensors[k].second));
    }
    write_safetensors((fs::path(path) / file).string(), part, inputs, what);
  }
  const nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", map}};
  write_output_file((fs::path(path) / kWeightsIndexFile).string(), index.dump(2) + "\n", inputs, what);
}

}  // namespace remat
