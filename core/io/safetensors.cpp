#include "core/io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/engine/model_state.h"
#include "core/util/bf16.h"
#include "core/util/error.h"
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

}  // namespace

std::map<std::string, SafeTensor> read_safetensors(const std::string& path) {
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
  const std::uint64_t data_size = size - 8 - n;

  // Every entry is checked before any data is read; the data ranges may not overlap (as the
  // reference implementation requires), so what is read is at most the file's data, and what is
  // kept (fp32) at most twice it: no names aliasing one buffer.
  struct Entry {
    const std::string* name;
    SafeTensor t;
    std::size_t esz;
    std::uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& d = it.value();
    if (!d.is_object() || !d.contains("dtype") || !d.contains("shape") || !d.contains("data_offsets"))
      throw bad("tensor '" + it.key() + "' lacks dtype, shape or data_offsets");
    SafeTensor t;
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
    std::uint64_t b = offsets[0].get<std::uint64_t>(), e = offsets[1].get<std::uint64_t>();
    if (e < b || e > data_size || e - b != numel * esz)
      throw bad("tensor '" + it.key() + "' has data offsets outside the file or not matching its shape");
    entries.push_back({&it.key(), std::move(t), esz, b, e});
  }
  std::vector<const Entry*> by_offset;
  for (const auto& e : entries)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry* a, const Entry* b) { return a->begin != b->begin ? a->begin < b->begin : a->end < b->end; });
  for (std::size_t k = 1; k < by_offset.size(); ++k) {
    const Entry& a = *by_offset[k - 1];
    const Entry& b = *by_offset[k];
    if (b.begin < a.end)
      throw bad("tensors '" + *a.name + "' and '" + *b.name + "' share bytes (data_offsets [" + std::to_string(a.begin) +
                ", " + std::to_string(a.end) + ") and [" + std::to_string(b.begin) + ", " + std::to_string(b.end) +
                ")); each tensor must have its own");
  }

  std::map<std::string, SafeTensor> out;
  std::vector<unsigned char> raw;
  for (auto& [name, t, esz, b, e] : entries) {
    const std::uint64_t numel = (e - b) / esz;
    raw.resize(e - b);
    in.seekg(static_cast<std::streamoff>(8 + n + b));
    in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
    if (!in) throw bad("truncated data for tensor '" + *name + "'");
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
    out.emplace(*name, std::move(t));
  }
  return out;
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

namespace {

// GPT-2 files carry the causal masks as buffers; a tied head's file may carry the embedding
// again as lm_head.weight (Hugging Face ties them on load).
bool is_buffer(const std::string& n, bool gpt2, bool tied) {
  auto ends = [&](const char* s) { return n.size() >= std::strlen(s) && n.compare(n.size() - std::strlen(s), std::strlen(s), s) == 0; };
  return (gpt2 && (ends(".attn.bias") || ends(".attn.masked_bias"))) || (tied && n == "lm_head.weight");
}

}  // namespace

std::vector<float> flat_from_hf(const std::map<std::string, SafeTensor>& file, const ParamLayout& L,
                                Family family, const std::string& path) {
  const bool gpt2 = family == Family::Gpt2, tied = L.lm_head < 0;
  // Accept GPT-2 names with or without the "transformer." prefix.
  std::map<std::string, const SafeTensor*> by_name;
  for (auto& [n, t] : file) {
    std::string key = n;
    if (gpt2 && key.rfind("transformer.", 0) != 0 && !is_buffer(key, gpt2, tied)) key = "transformer." + key;
    by_name[key] = &t;
  }
  std::vector<float> host(static_cast<std::size_t>(L.total()));
  auto take = [&](const std::string& name, std::int64_t rows, std::int64_t cols, bool transposed, float* dst) {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw Error("safetensors file '" + path + "': missing tensor '" + name + "'");
    const SafeTensor& t = *it->second;
    std::int64_t r = transposed ? cols : rows, c = transposed ? rows : cols;
    bool ok = (c == 1 && t.shape.size() == 1 && t.shape[0] == r) ||
              (t.shape.size() == 2 && t.shape[0] == r && t.shape[1] == c);
    if (!ok) {
      std::string got;
      for (auto s : t.shape) got += (got.empty() ? "" : "x") + std::to_string(s);
      throw Error("safetensors file '" + path + "': tensor '" + name + "' has shape " + got +
                  ", expected " + std::to_string(r) + (c == 1 ? "" : "x" + std::to_string(c)));
    }
    if (!transposed) {
      std::copy(t.values.begin(), t.values.end(), dst);
    } else {
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j) dst[i * cols + j] = t.values[j * rows + i];
    }
  };
  for (const auto& p : L.params()) {
    float* dst = host.data() + p.offset;
    if (p.hf_qkv.groups > 0) {  // stored by kv group: read, then put in our order
      std::vector<float> grouped(static_cast<std::size_t>(p.numel()));
      take(p.hf_name, p.rows, p.cols, false, grouped.data());
      qkv_rows_from_hf(p, grouped.data(), dst);
    } else if (p.hf_parts.empty()) {
      take(p.hf_name, p.rows, p.cols, p.hf_transposed, dst);
    } else {
      for (const auto& [name, rows] : p.hf_parts) {
        take(name, rows, p.cols, false, dst);
        dst += rows * p.cols;
      }
    }
  }
  for (const auto& [n, t] : by_name)
    if (!is_buffer(n, gpt2, tied) && !L.find(n)) {
      bool part = false;
      for (const auto& p : L.params())
        for (const auto& hp : p.hf_parts) part = part || hp.first == n;
      if (!part) throw Error("safetensors file '" + path + "': tensor '" + n + "' is not part of this model");
    }
  return host;
}

void load_safetensors(const std::string& path, ModelState& state) {
  state.write_params(flat_from_hf(read_safetensors(path), state.layout(), state.config().family, path));
}

namespace {

// A flat buffer in the layout's order as tensors under the Hugging Face names and shapes.
std::map<std::string, SafeTensor> hf_from_flat(const std::vector<float>& host, const ParamLayout& layout) {
  std::map<std::string, SafeTensor> out;
  for (const auto& p : layout.params()) {
    const float* src = host.data() + p.offset;
    if (!p.hf_parts.empty()) {
      for (const auto& [name, rows] : p.hf_parts) {
        SafeTensor t{"F32", p.cols == 1 ? std::vector<std::int64_t>{rows} : std::vector<std::int64_t>{rows, p.cols},
                     std::vector<float>(src, src + rows * p.cols)};
        out[name] = std::move(t);
        src += rows * p.cols;
      }
      continue;
    }
    SafeTensor t;
    t.dtype = "F32";
    if (p.cols == 1) {
      t.shape = {p.rows};
      t.values.assign(src, src + p.rows);
    } else if (p.hf_transposed) {
      t.shape = {p.cols, p.rows};
      t.values.resize(static_cast<std::size_t>(p.numel()));
      for (std::int64_t i = 0; i < p.rows; ++i)
        for (std::int64_t j = 0; j < p.cols; ++j) t.values[j * p.rows + i] = src[i * p.cols + j];
    } else {
      t.shape = {p.rows, p.cols};
      t.values.assign(src, src + p.numel());
    }
    if (p.hf_qkv.groups > 0) qkv_rows_to_hf(p, src, t.values.data());
    out[p.hf_name] = std::move(t);
  }
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
