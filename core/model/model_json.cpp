// Our model JSON (docs/model-config.md) and model files of either format.
#include <nlohmann/json.hpp>
#include <set>

#include "core/model/model_config.h"
#include "core/util/error.h"
#include "core/util/json_io.h"

namespace remat {

namespace {

const std::set<std::string> kOwnKeys = {
    "name", "architecture", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "seq",
    "batch", "vocab", "positions", "dropout", "dropout_sites", "attention", "dtype", "norm_eps",
    "rope_theta", "rope_scaling", "partial_rotary_factor", "rope_interleaved", "attn_temperature_floor", "attn_temperature_scale", "description", "norm",
    "norm_unit_offset", "norm_placement", "position", "qkv_bias", "out_bias", "mlp_bias",
    "qk_norm", "sliding_window", "sliding_window_layers", "attn_scale",
    "attn_scale_inverse_layer", "attn_softcap", "final_softcap", "attn_sinks", "mlp", "tied_embeddings",
    "embed_scale", "block_layout", "sliding_window_pattern", "rope_local_theta", "embedding_multiplier", "residual_multiplier", "logits_scaling",
    "swiglu_limit", "layer_kinds", "layer_pattern", "moe", "mla"};

int get_int(const nlohmann::json& j, const char* key) { return json_int(j.at(key), key); }

double get_number(const nlohmann::json& j, const char* key) { return json_number(j.at(key), key); }

std::string get_string(const nlohmann::json& j, const char* key) {
  const auto& v = j.at(key);
  if (!v.is_string()) throw ConfigError(key, "must be a string, got " + json_snippet(v));
  return v.get<std::string>();
}

bool get_bool(const nlohmann::json& j, const char* key) { return json_bool(j.at(key), key); }

// One of `names` (the enum's values in order), or a ConfigError listing them.
template <class E, std::size_t N>
E get_enum(const nlohmann::json& j, const char* key, const char* const (&names)[N]) {
  std::string s = get_string(j, key), known;
  for (std::size_t i = 0; i < N; ++i) {
    if (s == names[i]) return static_cast<E>(i);
    known += (i ? " | " : "") + std::string(names[i]);
  }
  throw ConfigError(key, "unknown value '" + s + "' (" + known + ")");
}

const char* const kAttention[] = {"naive", "flash"};
const char* const kNorm[] = {"layernorm", "rmsnorm"};
const char* const kPlacement[] = {"pre", "post", "sandwich"};
const char* const kPosition[] = {"learned", "rope"};
const char* const kMlp[] = {"gelu_tanh", "gelu", "swiglu", "geglu", "swiglu_clamped"};
const char* const kWindowLayers[] = {"all", "even"};
const char* const kSites[] = {"embedding", "attention", "residual"};
const char* const kQkNorm[] = {"none", "projection", "head", "head_l2"};
const char* const kBlockLayout[] = {"sequential", "parallel", "parallel_shared_norm"};

unsigned get_sites(const nlohmann::json& j) {
  const auto& v = j.at("dropout_sites");
  if (!v.is_array()) throw ConfigError("dropout_sites", "must be a list of sites, got " + json_snippet(v));
  unsigned bits = 0;
  for (const auto& e : v) {
    nlohmann::json one = {{"dropout_sites", e}};
    bits |= 1u << static_cast<unsigned>(get_enum<int>(one, "dropout_sites", kSites));
  }
  return bits;
}

}  // namespace

ModelConfig model_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw ConfigError("model", "must be a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!kOwnKeys.count(it.key())) throw ConfigError(it.key(), "unknown field");
  ModelConfig m;
  if (j.contains("name")) m.name = get_string(j, "name");
  if (!j.contains("architecture")) throw ConfigError("architecture", "missing");
  set_family(m, parse_family(get_string(j, "architecture"), "architecture"));
  for (const char* k : {"layers", "hidden", "heads", "seq", "batch", "vocab"})
    if (!j.contains(k)) throw ConfigError(k, "missing");
  m.layers = get_int(j, "layers");
  m.hidden = get_int(j, "hidden");
  m.heads = get_int(j, "heads");
  m.kv_heads = j.contains("kv_heads") ? get_int(j, "kv_heads") : m.heads;
  if (j.contains("head_dim")) m.head_size = get_int(j, "head_dim");
  m.seq = get_int(j, "seq");
  m.batch = get_int(j, "batch");
  m.vocab = get_int(j, "vocab");
  if (j.contains("mlp")) m.mlp = get_enum<MlpKind>(j, "mlp", kMlp);
  if (j.contains("ffn")) {
    m.ffn = get_int(j, "ffn");
  } else if (!m.gated_mlp()) {
    m.ffn = 4 * m.hidden;
  } else {
    throw ConfigError("ffn", std::string("missing (a ") + to_string(m.mlp) + " MLP needs an explicit ffn size)");
  }
  m.positions = j.contains("positions") ? get_int(j, "positions") : m.seq;
  m.dropout = j.contains("dropout") ? get_number(j, "dropout") : 0.0;
  if (j.contains("dropout_sites")) m.dropout_sites = get_sites(j);
  if (j.contains("attention")) m.attention = get_enum<AttentionImpl>(j, "attention", kAttention);
  if (j.contains("dtype")) {
    std::string d = get_string(j, "dtype");
    if (d == "bf16") m.dtype = DType::BF16;
    else if (d == "fp32") m.dtype = DType::F32;
    else throw ConfigError("dtype", "unknown dtype '" + d + "' (bf16 | fp32)");
  }
  if (j.contains("norm_eps")) m.norm_eps = get_number(j, "norm_eps");
  if (j.contains("rope_theta")) m.rope_theta = get_number(j, "rope_theta");
  if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null()) {
    std::vector<std::pair<std::string, std::string>> problems;
    m.rope_scaling = rope_scaling_from_json(j.at("rope_scaling"), problems);
    if (!problems.empty()) throw ConfigError(problems[0].first, problems[0].second);
  }
  if (j.contains("partial_rotary_factor")) m.partial_rotary = get_number(j, "partial_rotary_factor");
  if (j.contains("rope_interleaved")) m.rope_interleaved = json_bool(j.at("rope_interleaved"), "rope_interleaved");
  if (j.contains("attn_temperature_floor")) m.attn_temperature_floor = get_int(j, "attn_temperature_floor");
  if (j.contains("attn_temperature_scale")) m.attn_temperature_scale = get_number(j, "attn_temperature_scale");
  if (j.contains("norm")) m.norm = get_enum<NormKind>(j, "norm", kNorm);
  if (j.contains("norm_unit_offset")) m.norm_unit_offset = get_bool(j, "norm_unit_offset");
  if (j.contains("norm_placement")) m.placement = get_enum<NormPlacement>(j, "norm_placement", kPlacement);
  if (j.contains("block_layout")) m.block_layout = get_enum<BlockLayout>(j, "block_layout", kBlockLayout);
  if (j.contains("position")) m.position = get_enum<PositionKind>(j, "position", kPosition);
  if (j.contains("qkv_bias")) m.qkv_bias = get_bool(j, "qkv_bias");
  if (j.contains("out_bias")) m.out_bias = get_bool(j, "out_bias");
  if (j.contains("mlp_bias")) m.mlp_bias = get_bool(j, "mlp_bias");
  if (j.contains("qk_norm")) {
    // true and false: the projection-wide norm or none, as files before "head" wrote them.
    const auto& v = j.at("qk_norm");
    m.qk_norm = v.is_boolean() ? (v.get<bool>() ? QkNormKind::Projection : QkNormKind::None)
                               : get_enum<QkNormKind>(j, "qk_norm", kQkNorm);
  }
  if (j.contains("sliding_window")) m.sliding_window = get_int(j, "sliding_window");
  if (j.contains("sliding_window_pattern")) m.window_pattern = get_int(j, "sliding_window_pattern");
  if (j.contains("rope_local_theta")) m.rope_local_theta = get_number(j, "rope_local_theta");
  if (j.contains("sliding_window_layers"))
    m.window_layers = get_enum<WindowLayers>(j, "sliding_window_layers", kWindowLayers);
  if (j.contains("attn_scale")) m.attn_scale = get_number(j, "attn_scale");
  if (j.contains("attn_scale_inverse_layer")) m.attn_scale_inverse_layer = get_bool(j, "attn_scale_inverse_layer");
  if (j.contains("attn_softcap")) m.attn_softcap = get_number(j, "attn_softcap");
  if (j.contains("final_softcap")) m.final_softcap = get_number(j, "final_softcap");
  if (j.contains("attn_sinks")) m.attn_sinks = get_bool(j, "attn_sinks");
  if (j.contains("tied_embeddings")) m.tied_embeddings = get_bool(j, "tied_embeddings");
  if (j.contains("embed_scale")) m.embed_scale = get_bool(j, "embed_scale");
  for (auto [key, field] : {std::pair{"embedding_multiplier", &m.embedding_multiplier},
                            std::pair{"residual_multiplier", &m.residual_multiplier},
                            std::pair{"logits_scaling", &m.logits_scaling}})
    if (j.contains(key)) *field = get_number(j, key);
  if (j.contains("swiglu_limit")) {
    if (m.mlp != MlpKind::SwiGluClamped)
      throw ConfigError("swiglu_limit", "clamps the swiglu_clamped activation; this model's mlp is " + std::string(to_string(m.mlp)));
    m.swiglu_limit = get_number(j, "swiglu_limit");
  }
  if (j.contains("layer_kinds") || j.contains("layer_pattern")) {
    if (!j.contains("layer_kinds") || !j.contains("layer_pattern"))
      throw ConfigError(j.contains("layer_kinds") ? "layer_pattern" : "layer_kinds",
                        "is needed too: layer kinds and the pattern giving one to each layer come together");
    for (const char* key : {"sliding_window", "sliding_window_layers", "sliding_window_pattern", "rope_local_theta"})
      if (j.contains(key))
        throw ConfigError(key, "and layer_kinds both give the layers' attention; the layer kinds alone do");
    m.window_layers = WindowLayers::All;  // the family's, not read with kinds
    m.window_pattern = 0;
    m.rope_local_theta = 0.0;
    m.layer_kinds = layer_kinds_from_json(j.at("layer_kinds"));
    m.layer_pattern = layer_pattern_from_json(j.at("layer_pattern"), m.layer_kinds);
  }
  if (j.contains("moe")) m.moe = moe_from_json(j.at("moe"));
  if (j.contains("mla")) m.mla = mla_from_json(j.at("mla"));
  m.validate();
  return m;
}

nlohmann::json model_to_json(const ModelConfig& m) {
  nlohmann::json j;
  j["name"] = m.name;
  j["architecture"] = to_string(m.family);
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
  // Features only where they differ from the family's, so a config reads back the same and
  // the files of a plain family keep their bytes.
  ModelConfig d = m;
  set_family(d, m.family);
  d.dropout_sites = kDropAll;
  if (m.head_size > 0) j["head_dim"] = m.head_size;
  if (m.dropout_sites != d.dropout_sites) {
    nlohmann::json sites = nlohmann::json::array();
    for (unsigned i = 0; i < 3; ++i)
      if (m.dropout_sites & (1u << i)) sites.push_back(kSites[i]);
    j["dropout_sites"] = sites;
  }
  auto feature = [&](const char* key, auto mine, auto def, auto value) {
    if (mine != def) j[key] = value;
  };
  feature("norm", m.norm, d.norm, to_string(m.norm));
  feature("norm_unit_offset", m.norm_unit_offset, d.norm_unit_offset, m.norm_unit_offset);
  feature("norm_placement", m.placement, d.placement, to_string(m.placement));
  feature("block_layout", m.block_layout, d.block_layout, to_string(m.block_layout));
  feature("position", m.position, d.position, to_string(m.position));
  if (m.rope_scaling.type != RopeType::Default) j["rope_scaling"] = rope_scaling_to_json(m.rope_scaling);
  feature("partial_rotary_factor", m.partial_rotary, 1.0, m.partial_rotary);
  feature("rope_interleaved", m.rope_interleaved, d.rope_interleaved, m.rope_interleaved);
  if (m.attn_temperature_floor > 0) {
    j["attn_temperature_floor"] = m.attn_temperature_floor;
    j["attn_temperature_scale"] = m.attn_temperature_scale;
  }
  feature("qkv_bias", m.qkv_bias, d.qkv_bias, m.qkv_bias);
  feature("out_bias", m.out_bias, d.out_bias, m.out_bias);
  feature("mlp_bias", m.mlp_bias, d.mlp_bias, m.mlp_bias);
  feature("qk_norm", m.qk_norm, d.qk_norm, to_string(m.qk_norm));
  if (m.layer_kinds.empty()) {  // else the kinds give the layers' attention
    feature("sliding_window", m.sliding_window, 0, m.sliding_window);
    feature("sliding_window_layers", m.window_layers, d.window_layers, to_string(m.window_layers));
    feature("sliding_window_pattern", m.window_pattern, d.window_pattern, m.window_pattern);
    feature("rope_local_theta", m.rope_local_theta, d.rope_local_theta, m.rope_local_theta);
  }
  feature("attn_scale", m.attn_scale, 0.0, m.attn_scale);
  feature("attn_scale_inverse_layer", m.attn_scale_inverse_layer, false, m.attn_scale_inverse_layer);
  feature("attn_softcap", m.attn_softcap, 0.0, m.attn_softcap);
  feature("final_softcap", m.final_softcap, 0.0, m.final_softcap);
  feature("attn_sinks", m.attn_sinks, d.attn_sinks, m.attn_sinks);
  feature("mlp", m.mlp, d.mlp, to_string(m.mlp));
  feature("tied_embeddings", m.tied_embeddings, d.tied_embeddings, m.tied_embeddings);
  feature("embed_scale", m.embed_scale, d.embed_scale, m.embed_scale);
  feature("embedding_multiplier", m.embedding_multiplier, 1.0, m.embedding_multiplier);
  feature("residual_multiplier", m.residual_multiplier, 1.0, m.residual_multiplier);
  feature("logits_scaling", m.logits_scaling, 1.0, m.logits_scaling);
  if (m.mlp == MlpKind::SwiGluClamped) j["swiglu_limit"] = m.swiglu_limit;
  if (!m.layer_kinds.empty()) {
    j["layer_kinds"] = layer_kinds_to_json(m.layer_kinds);
    j["layer_pattern"] = layer_pattern_to_json(m.layer_pattern, m.layer_kinds);
  }
  if (m.moe.on()) j["moe"] = moe_to_json(m.moe);
  if (m.mla.on()) j["mla"] = mla_to_json(m.mla);
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
