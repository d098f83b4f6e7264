#include "core/io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/engine/model_state.h"
#include "core/io/hf_tensor_names.h"
#include "core/util/bf16.h"
#include "core/util/error.h"
#include "core/util/hash.h"
#include "core/util/json_io.h"
#include "core/util/output_file.h"

namespace remat {

namespace {

float half_to_float(std::uint16_t h) {
  std::uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  float f;
  if (exp == 0) f = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31) f = man ? NAN : INFINITY;
  else f = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
  return sign ? -f : f;
}

// The length bytes and the header: what read_safetensors_data checks is the header it was given.
std::uint64_t header_hash(const unsigned char* len, const std::string& header) {
  Fnv1a64 h;
  h.update(len, 8);
  h.update(header.data(), header.size());
  return h.value();
}

}  // namespace

std::uint64_t SafetensorsHeader::data_bytes() const {
  std::uint64_t n = 0;
  for (const auto& e : entries) n += e.end - e.begin;
  return n;
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
  auto bad = [&](const std::string& why) -> Error { return Error("safetensors file '" + path + "': " + why); };
  require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read safetensors file '" + path + "'");
  in.seekg(0, std::ios::end);
  const std::uint64_t size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  if (size < 8) throw bad("too short to hold a header");
  std::uint64_t n = 0;
  unsigned char len[8];
  if (!in.read(reinterpret_cast<char*>(len), 8)) throw bad("cannot read the header length");
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  if (n == 0 || n > size - 8 || n > (100u << 20)) throw bad("header length " + std::to_string(n) + " is invalid");
  std::string header(n, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(n))) throw bad("truncated header");
  nlohmann::json h = parse_json(header, "safetensors file '" + path + "': malformed header");
  if (!h.is_object()) throw bad("header is not a JSON object");
  SafetensorsHeader out;
  out.path = path;
  out.file_size = size;
  out.data_start = 8 + n;
  out.header_hash = header_hash(len, header);
  const std::uint64_t data_size = size - 8 - n;

  // Every entry is checked before any data is read; the data ranges may not overlap (as the
  // reference implementation requires), so what is read is at most the file's data, and what is
  // kept (fp32) at most twice it: no names aliasing one buffer.
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& d = it.value();
    if (!d.is_object() || !d.contains("dtype") || !d.contains("shape") || !d.contains("data_offsets"))
      throw bad("tensor '" + it.key() + "' lacks dtype, shape or data_offsets");
    SafetensorsEntry t;
    t.name = it.key();
    if (!d["dtype"].is_string()) throw bad("tensor '" + it.key() + "' has a dtype that is not a string");
    t.dtype = d["dtype"].get<std::string>();
    std::size_t esz = t.dtype == "F32" ? 4 : (t.dtype == "BF16" || t.dtype == "F16") ? 2 : 0;
    if (esz == 0) throw bad("tensor '" + it.key() + "' has unsupported dtype " + t.dtype);
    // The element count; its bytes must not overflow, they are compared with the offsets below.
    std::uint64_t numel = 1;
    if (!d["shape"].is_array()) throw bad("tensor '" + it.key() + "' has a bad shape");
    for (const auto& s : d["shape"]) {
      if (!s.is_number_integer() || s.get<std::int64_t>() < 0) throw bad("tensor '" + it.key() + "' has a bad shape");
      t.shape.push_back(s.get<std::int64_t>());
      const auto dim = static_cast<std::uint64_t>(t.shape.back());
      if (dim != 0 && numel > std::numeric_limits<std::uint64_t>::max() / esz / dim)
        throw bad("tensor '" + it.key() + "' has a bad shape: its byte count overflows 64 bits");
      numel *= dim;
    }
    const auto& offsets = d["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      throw bad("tensor '" + it.key() + "' has bad data_offsets (two non-negative integers expected)");
    t.begin = offsets[0].get<std::uint64_t>();
    t.end = offsets[1].get<std::uint64_t>();
    if (t.end < t.begin || t.end > data_size || t.end - t.begin != numel * esz)
      throw bad("tensor '" + it.key() + "' has data offsets outside the file or not matching its shape");
    out.entries.push_back(std::move(t));
  }
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : out.entries)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  for (std::size_t k = 1; k < by_offset.size(); ++k) {
    const SafetensorsEntry& a = *by_offset[k - 1];
    const SafetensorsEntry& b = *by_offset[k];
    if (b.begin < a.end)
      throw bad("tensors '" + a.name + "' and '" + b.name + "' share bytes (data_offsets [" + std::to_string(a.begin) +
                ", " + std::to_string(a.end) + ") and [" + std::to_string(b.begin) + ", " + std::to_string(b.end) +
                ")); each tensor must have its own");
  }
  return out;
}

std::map<std::string, SafeTensor> read_safetensors_data(const SafetensorsHeader& h) {
  auto bad = [&](const std::string& why) -> Error { return Error("safetensors file '" + h.path + "': " + why); };
  require_regular_file(h.path);
  std::ifstream in(h.path, std::ios::binary);
  if (!in) throw Error("cannot read safetensors file '" + h.path + "'");
  in.seekg(0, std::ios::end);
  const std::uint64_t size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  std::string start(h.data_start, '\0');
  if (size != h.file_size || h.data_start < 8 || !in.read(start.data(), static_cast<std::streamsize>(start.size())) ||
      header_hash(reinterpret_cast<const unsigned char*>(start.data()), start.substr(8)) != h.header_hash)
    throw bad("changed since its header was read");
  std::map<std::string, SafeTensor> out;
  std::vector<unsigned char> raw;
  for (const auto& e : h.entries) {
    SafeTensor t{e.dtype, e.shape, {}};
    const std::size_t esz = e.dtype == "F32" ? 4 : 2;
    const std::uint64_t numel = (e.end - e.begin) / esz;
    raw.resize(e.end - e.begin);
    in.seekg(static_cast<std::streamoff>(h.data_start + e.begin));
    in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
    if (!in) throw bad("truncated data for tensor '" + e.name + "'");
    t.values.resize(numel);
    for (std::uint64_t i = 0; i < numel; ++i) {
      if (esz == 4) {
        std::memcpy(&t.values[i], raw.data() + 4 * i, 4);
      } else {
        std::uint16_t v;
        std::memcpy(&v, raw.data() + 2 * i, 2);
        t.values[i] = t.dtype == "BF16" ? bf16_to_float(v) : half_to_float(v);
      }
    }
    out.emplace(e.name, std::move(t));
  }
  return out;
}

std::map<std::string, SafeTensor> read_safetensors(const std::string& path) {
  return read_safetensors_data(read_safetensors_header(path));
}

void write_safetensors(const std::string& path, const std::map<std::string, SafeTensor>& tensors,
                       const InputFiles& inputs, const std::string& what) {
  nlohmann::json h;
  h["__metadata__"] = {{"format", "pt"}, {"producer", "rematlab"}};
  std::uint64_t off = 0;
  for (const auto& [name, t] : tensors) {
    std::uint64_t bytes = t.values.size() * 4;
    h[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {off, off + bytes}}};
    off += bytes;
  }
  std::string header = h.dump();
  while ((8 + header.size()) % 8) header.push_back(' ');
  // Through the one writer (output_file.h): a temporary file of ours, every write checked,
  // renamed over nothing but a regular file that is none of the inputs.
  OutputFile f(path, inputs, what);
  std::uint64_t n = header.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  f.write(len, 8);
  f.write(header);
  for (const auto& [name, t] : tensors) f.write(t.values.data(), t.values.size() * sizeof(float));
  f.commit();
}

TensorOrigin TensorOrigin::file(const std::string& path) { return {"safetensors file '" + path + "'", {}}; }

const std::string& TensorOrigin::of(const std::string& tensor) const {
  auto it = file_of.find(tensor);
  return it == file_of.end() ? whole : it->second;
}

namespace {

// The file's tensors that are parameters of the step, by the layout's name (HfTensorNames); two
// tensors under one name ("h.0.ln_1.weight" and "transformer.h.0.ln_1.weight") are refused.
template <class T>
std::map<std::string, std::pair<const std::string*, const T*>> by_layout_name(const std::map<std::string, T>& file,
                                                                              const HfTensorNames& names,
                                                                              const TensorOrigin& origin) {
  std::map<std::string, std::pair<const std::string*, const T*>> out;
  for (auto& [n, t] : file) {
    if (names.skipped(n)) continue;
    auto [it, fresh] = out.emplace(names.layout_name(n), std::make_pair(&n, &t));
    if (!fresh) {
      const std::string& a = origin.of(*it->second.first);
      throw Error((a == origin.of(n) ? a : a + " and " + origin.of(n)) + ": tensors '" + *it->second.first + "' and '" +
                  n + "' are both the model's '" + it->first + "'; keep one");
    }
  }
  return out;
}

// Calls f(name, rows, cols, transposed, offset, special) for every tensor of the layout in its
// order; `special` is the parameter whose values Hugging Face stores in another order (q|k|v rows
// by kv group, hf_qkv; every expert's part in one tensor, hf_stack), else null.
template <class F>
void each_hf_tensor(const ParamLayout& L, F&& f) {
  for (const auto& p : L.params()) {
    if (p.hf_name.empty()) continue;  // rows of the tensor before it (hf_rows)
    if (p.hf_qkv.groups > 0 || p.hf_stack.experts > 0) {
      f(p.hf_name, p.rows, p.cols, false, p.offset, &p);
    } else if (p.hf_parts.empty()) {
      f(p.hf_name, p.hf_rows > 0 ? p.hf_rows : p.rows, p.cols, p.hf_transposed, p.offset, nullptr);
    } else {
      std::int64_t off = p.offset;
      for (const auto& [name, rows] : p.hf_parts) {
        f(name, rows, p.cols, false, off, nullptr);
        off += rows * p.cols;
      }
    }
  }
}

}  // namespace

void check_hf_tensors(const std::map<std::string, std::vector<std::int64_t>>& shapes, const ParamLayout& L,
                      Family family, const TensorOrigin& origin) {
  const auto by_name = by_layout_name(shapes, HfTensorNames(family, L.lm_head < 0), origin);
  std::set<std::string> taken;
  auto dims = [](const std::vector<std::int64_t>& shape) {
    std::string s;
    for (auto d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
    return s;
  };
  each_hf_tensor(L, [&](const std::string& name, std::int64_t rows, std::int64_t cols, bool transposed, std::int64_t,
                        const ParamSpec* special) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      // gpt-oss's published checkpoints store the experts as MXFP4 blocks and scales.
      const bool mxfp4 = by_name.count(name + "_blocks") > 0;
      throw Error(origin.whole + ": missing tensor '" + name + "'" +
                  (mxfp4 ? " (the file has it as MXFP4 '" + name + "_blocks' and '_scales': dequantize it to bf16 "
                           "or fp32 first, as transformers does when it loads the model)"
                         : ""));
    }
    taken.insert(name);
    const std::vector<std::int64_t>& shape = *it->second.second;
    if (special && special->hf_stack.experts > 0) {
      const std::vector<std::int64_t> want = stacked_hf_shape(*special);
      if (shape != want)
        throw Error(origin.of(*it->second.first) + ": tensor '" + *it->second.first + "' has shape " + dims(shape) +
                    ", expected " + dims(want));
      return;
    }
    std::int64_t r = transposed ? cols : rows, c = transposed ? rows : cols;
    bool ok = (c == 1 && shape.size() == 1 && shape[0] == r) || (shape.size() == 2 && shape[0] == r && shape[1] == c);
    if (!ok)
      throw Error(origin.of(*it->second.first) + ": tensor '" + *it->second.first + "' has shape " + dims(shape) +
                  ", expected " + std::to_string(r) + (c == 1 ? "" : "x" + std::to_string(c)));
  });
  for (const auto& [n, t] : by_name)
    if (!taken.count(n))
      throw Error(origin.of(*t.first) + ": tensor '" + *t.first + "' is not part of this model");
}

std::vector<float> flat_from_hf(const std::map<std::string, SafeTensor>& file, const ParamLayout& L,
                                Family family, const TensorOrigin& origin) {
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const auto& [n, t] : file) {
    std::uint64_t numel = 1;
    for (auto d : t.shape) numel *= static_cast<std::uint64_t>(std::max<std::int64_t>(d, 0));
    if (numel != t.values.size())
      throw Error(origin.of(n) + ": tensor '" + n + "' holds " + std::to_string(t.values.size()) +
                  " values, its shape " + std::to_string(numel));
    shapes.emplace(n, t.shape);
  }
  check_hf_tensors(shapes, L, family, origin);
  const auto by_name = by_layout_name(file, HfTensorNames(family, L.lm_head < 0), origin);
  std::vector<float> host(static_cast<std::size_t>(L.total()));
  each_hf_tensor(L, [&](const std::string& name, std::int64_t rows, std::int64_t cols, bool transposed,
                        std::int64_t offset, const ParamSpec* special) {
    const SafeTensor& t = *by_name.at(name).second;
    float* dst = host.data() + offset;
    if (special && special->hf_stack.experts > 0) {  // every expert's part in one tensor
      stacked_from_hf(*special, t.values.data(), dst);
    } else if (special) {  // stored by kv group: put in our order
      qkv_rows_from_hf(*special, t.values.data(), dst);
    } else if (!transposed) {
      std::copy(t.values.begin(), t.values.end(), dst);
    } else {
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j) dst[i * cols + j] = t.values[j * rows + i];
    }
  });
  return host;
}

std::vector<float> flat_from_hf(const std::map<std::string, SafeTensor>& file, const ParamLayout& L, Family family,
                                const std::string& path) {
  return flat_from_hf(file, L, family, TensorOrigin::file(path));
}

void load_safetensors(const std::string& path, ModelState& state) {
  state.write_params(flat_from_hf(read_safetensors(path), state.layout(), state.config().family, path));
}

std::vector<std::pair<std::string, SafeTensor>> hf_tensors(const std::vector<float>& host, const ParamLayout& layout) {
  std::vector<std::pair<std::string, SafeTensor>> out;
  each_hf_tensor(layout, [&](const std::string& name, std::int64_t rows, std::int64_t cols, bool transposed,
                             std::int64_t offset, const ParamSpec* special) {
    const float* src = host.data() + offset;
    SafeTensor t;
    t.dtype = "F32";
    const bool stacked = special && special->hf_stack.experts > 0;
    t.shape = stacked ? stacked_hf_shape(*special)
              : cols == 1 ? std::vector<std::int64_t>{rows}
              : transposed ? std::vector<std::int64_t>{cols, rows}
                           : std::vector<std::int64_t>{rows, cols};
    if (stacked) {
      t.values.resize(static_cast<std::size_t>(rows * cols));
      stacked_to_hf(*special, src, t.values.data());
    } else if (special) {
      t.values.resize(static_cast<std::size_t>(rows * cols));
      qkv_rows_to_hf(*special, src, t.values.data());
    } else if (!transposed) {
      t.values.assign(src, src + rows * cols);
    } else {
      t.values.resize(static_cast<std::size_t>(rows * cols));
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j) t.values[j * rows + i] = src[i * cols + j];
    }
    out.emplace_back(name, std::move(t));
  });
  return out;
}

std::vector<std::pair<std::string, std::uint64_t>> hf_tensor_bytes(const ParamLayout& layout) {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  each_hf_tensor(layout, [&](const std::string& name, std::int64_t rows, std::int64_t cols, bool, std::int64_t,
                             const ParamSpec*) {
    out.emplace_back(name, static_cast<std::uint64_t>(rows * cols) * sizeof(float));
  });
  return out;
}

namespace {

std::map<std::string, SafeTensor> hf_from_flat(const std::vector<float>& host, const ParamLayout& layout) {
  std::map<std::string, SafeTensor> out;
  for (auto& [name, t] : hf_tensors(host, layout)) out.emplace(name, std::move(t));
  return out;
}

}  // namespace

void write_flat_safetensors(const std::string& path, const std::vector<float>& flat, const ParamLayout& layout,
                            const InputFiles& inputs, const std::string& what) {
  if (static_cast<std::int64_t>(flat.size()) != layout.total())
    throw Error("cannot write '" + path + "': " + std::to_string(flat.size()) + " values, the model has " +
                std::to_string(layout.total()));
  write_safetensors(path, hf_from_flat(flat, layout), inputs, what);
}

void save_safetensors(const std::string& path, const ModelState& state, const InputFiles& inputs,
                      const std::string& what) {
  write_safetensors(path, hf_from_flat(state.read_params(), state.layout()), inputs, what);
}

void save_grads_safetensors(const std::string& path, const ModelState& state, const InputFiles& inputs,
                            const std::string& what) {
  write_safetensors(path, hf_from_flat(state.read_grads(), state.layout()), inputs, what);
}

}  // namespace remat
