#include "core/model/model_config.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/util/error.h"
#include "core/util/json_io.h"

namespace remat {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::U8: return 1;
    case DType::I32: return 4;
  }
  return 0;
}

const char* to_string(Architecture a) { return a == Architecture::Gpt2 ? "gpt2" : "llama"; }
const char* to_string(AttentionImpl a) { return a == AttentionImpl::Naive ? "naive" : "flash"; }
const char* to_string(DType t) {
  switch (t) {
    case DType::F32: return "fp32";
    case DType::BF16: return "bf16";
    case DType::U8: return "u8";
    case DType::I32: return "i32";
  }
  return "?";
}

namespace {

void require_positive(const char* field, long long v) {
  if (v <= 0) throw ConfigError(field, "must be a positive integer, got " + std::to_string(v));
}

// a*b*c... in bytes must fit comfortably in 63 bits.
bool mul_overflows(std::initializer_list<long double> factors) {
  long double p = 1;
  for (long double f : factors) p *= f;
  return p > static_cast<long double>(std::numeric_limits<std::int64_t>::max() / 64);
}

}  // namespace

void ModelConfig::validate() const {
  require_positive("layers", layers);
  require_positive("hidden", hidden);
  require_positive("heads", heads);
  require_positive("kv_heads", kv_heads);
  require_positive("ffn", ffn);
  require_positive("seq", seq);
  require_positive("batch", batch);
  require_positive("vocab", vocab);
  require_positive("positions", positions);
  if (layers > limits::kLayers)
    throw LimitError("layers: " + std::to_string(layers) + " is more than the " +
                     std::to_string(limits::kLayers) + " layers a model may have");
  if (hidden % heads != 0)
    throw ConfigError("hidden", std::to_string(hidden) + " is not divisible by heads = " +
                                    std::to_string(heads));
  if (heads % kv_heads != 0)
    throw ConfigError("kv_heads", std::to_string(kv_heads) + " does not divide heads = " +
                                      std::to_string(heads));
  if (arch == Architecture::Gpt2 && kv_heads != heads)
    throw ConfigError("kv_heads", "gpt2 has no grouped-query attention: kv_heads (" +
                                      std::to_string(kv_heads) + ") must equal heads (" +
                                      std::to_string(heads) + ")");
  if (arch == Architecture::Llama && head_dim() % 2 != 0)
    throw ConfigError("hidden", "llama needs an even head dimension for RoPE, got hidden/heads = " +
                                    std::to_string(head_dim()));
  if (arch == Architecture::Gpt2 && seq > positions)
    throw ConfigError("seq", std::to_string(seq) + " exceeds the position table (positions = " +
                                 std::to_string(positions) + ")");
  if (!(dropout >= 0.0 && dropout < 1.0))
    throw ConfigError("dropout", "must be in [0, 1), got " + std::to_string(dropout));
  if (!(norm_eps > 0.0 && std::isfinite(norm_eps)))
    throw ConfigError("norm_eps", "must be a positive number, got " + std::to_string(norm_eps));
  if (!(rope_theta > 0.0 && std::isfinite(rope_theta)))
    throw ConfigError("rope_theta", "must be a positive number, got " + std::to_string(rope_theta));
  if (dtype != DType::BF16 && dtype != DType::F32)
    throw ConfigError("dtype", std::string("must be bf16 or fp32, got ") + to_string(dtype));
  // Byte counts: the s^2 attention tensor, the widest activation, the parameter count x 16.
  long double s = seq, b = batch, a = heads, h = hidden, f = ffn, V = vocab, L = layers;
  if (mul_overflows({b, a, s, s, 4}))
    throw ConfigError("seq", "batch x heads x seq^2 overflows 64-bit byte counts (seq = " +
                                 std::to_string(seq) + ")");
  if (mul_overflows({b, s, V, 4}) || mul_overflows({b, s, f, 8}) || mul_overflows({b, s, h, 8}))
    throw ConfigError("batch", "activation byte counts overflow 64 bits");
  long double params = L * (12 * h * h + 13 * h) + V * h + positions * h;
  if (arch == Architecture::Llama) params = L * (4 * h * h + 3 * h * f) + 2 * V * h;
  if (mul_overflows({params, 16}))
    throw ConfigError("layers", "parameter byte counts overflow 64 bits");
}

namespace {

const std::set<std::string> kOwnKeys = {"name",    "architecture", "layers",   "hidden",
                                        "heads",   "kv_heads",     "ffn",      "seq",
                                        "batch",   "vocab",        "positions", "dropout",
                                        "attention", "dtype",      "norm_eps", "rope_theta",
                                        "description"};

int get_int(const nlohmann::json& j, const char* key) { return json_int(j.at(key), key); }

double get_number(const nlohmann::json& j, const char* key) {
  const auto& v = j.at(key);
  if (!v.is_number()) throw ConfigError(key, "must be a number, got " + json_snippet(v));
  return v.get<double>();
}

std::string get_string(const nlohmann::json& j, const char* key) {
  const auto& v = j.at(key);
  if (!v.is_string()) throw ConfigError(key, "must be a string, got " + json_snippet(v));
  return v.get<std::string>();
}

}  // namespace

ModelConfig model_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw ConfigError("model", "must be a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!kOwnKeys.count(it.key())) throw ConfigError(it.key(), "unknown field");
  ModelConfig m;
  if (j.contains("name")) m.name = get_string(j, "name");
  if (!j.contains("architecture")) throw ConfigError("architecture", "missing");
  std::string arch = get_string(j, "architecture");
  if (arch == "gpt2") m.arch = Architecture::Gpt2;
  else if (arch == "llama") m.arch = Architecture::Llama;
  else throw ConfigError("architecture", "unknown architecture '" + arch + "' (gpt2 | llama)");
  for (const char* k : {"layers", "hidden", "heads", "seq", "batch", "vocab"})
    if (!j.contains(k)) throw ConfigError(k, "missing");
  m.layers = get_int(j, "layers");
  m.hidden = get_int(j, "hidden");
  m.heads = get_int(j, "heads");
  m.kv_heads = j.contains("kv_heads") ? get_int(j, "kv_heads") : m.heads;
  m.seq = get_int(j, "seq");
  m.batch = get_int(j, "batch");
  m.vocab = get_int(j, "vocab");
  if (j.contains("ffn")) {
    m.ffn = get_int(j, "ffn");
  } else if (m.arch == Architecture::Gpt2) {
    m.ffn = 4 * m.hidden;
  } else {
    throw ConfigError("ffn", "missing (llama needs an explicit ffn size)");
  }
  m.positions = j.contains("positions") ? get_int(j, "positions") : m.seq;
  m.dropout = j.contains("dropout") ? get_number(j, "dropout") : 0.0;
  if (j.contains("attention")) {
    std::string a = get_string(j, "attention");
    if (a == "naive") m.attention = AttentionImpl::Naive;
    else if (a == "flash") m.attention = AttentionImpl::Flash;
    else throw ConfigError("attention", "unknown attention '" + a + "' (naive | flash)");
  }
  if (j.contains("dtype")) {
    std::string d = get_string(j, "dtype");
    if (d == "bf16") m.dtype = DType::BF16;
    else if (d == "fp32") m.dtype = DType::F32;
    else throw ConfigError("dtype", "unknown dtype '" + d + "' (bf16 | fp32)");
  }
  if (j.contains("norm_eps")) m.norm_eps = get_number(j, "norm_eps");
  if (j.contains("rope_theta")) m.rope_theta = get_number(j, "rope_theta");
  m.validate();
  return m;
}

nlohmann::json model_to_json(const ModelConfig& m) {
  nlohmann::json j;
  j["name"] = m.name;
  j["architecture"] = to_string(m.arch);
  j["layers"] = m.layers;
  j["hidden"] = m.hidden;
  j["heads"] = m.heads;
  j["kv_heads"] = m.kv_heads;
  j["ffn"] = m.ffn;
  j["seq"] = m.seq;
  j["batch"] = m.batch;
  j["vocab"] = m.vocab;
  j["positions"] = m.positions;
  j["dropout"] = m.dropout;
  j["attention"] = to_string(m.attention);
  j["dtype"] = to_string(m.dtype);
  j["norm_eps"] = m.norm_eps;
  j["rope_theta"] = m.rope_theta;
  return j;
}

ModelConfig load_model_file(const std::string& path) {
  nlohmann::json j = read_json_file(path);
  std::string stem = path;
  auto slash = stem.find_last_of('/');
  if (slash != std::string::npos) stem = stem.substr(slash + 1);
  auto dot = stem.rfind(".json");
  if (dot != std::string::npos) stem = stem.substr(0, dot);
  try {
    if (j.is_object() && j.contains("model_type")) return model_from_hf_json(j, stem);
    ModelConfig m = model_from_json(j);
    if (!j.contains("name")) m.name = stem;
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw Error("model file '" + path + "': " + e.what());
  }
}

}  // namespace remat
