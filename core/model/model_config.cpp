#include "core/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/util/bf16.h"
#include "core/util/error.h"
#include "core/util/limits.h"

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

namespace {
const char* const kFamilies[] = {"gpt2", "llama", "mistral", "qwen2", "gemma", "gemma2", "phi3", "olmo2", "qwen3", "granite", "gpt_neox", "falcon",
                                 "gemma3", "smollm3", "mixtral", "qwen3_moe", "qwen2_moe",
                                 "deepseek_v2", "deepseek_v3", "gpt_oss", "llama4_text"};
}  // namespace

const char* to_string(Family f) { return kFamilies[static_cast<int>(f)]; }
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
const char* to_string(NormKind k) { return k == NormKind::LayerNorm ? "layernorm" : "rmsnorm"; }
const char* to_string(NormPlacement p) {
  return p == NormPlacement::Pre ? "pre" : p == NormPlacement::Post ? "post" : "sandwich";
}
const char* to_string(PositionKind k) { return k == PositionKind::Learned ? "learned" : "rope"; }
const char* to_string(MlpKind k) {
  static const char* n[] = {"gelu_tanh", "gelu", "swiglu", "geglu", "swiglu_clamped"};
  return n[static_cast<int>(k)];
}
const char* to_string(WindowLayers w) { return w == WindowLayers::All ? "all" : "even"; }
const char* to_string(BlockLayout b) {
  static const char* n[] = {"sequential", "parallel", "parallel_shared_norm"};
  return n[static_cast<int>(b)];
}
const char* to_string(QkNormKind k) {
  static const char* n[] = {"none", "projection", "head", "head_l2"};
  return n[static_cast<int>(k)];
}

std::vector<std::string> family_names() { return {std::begin(kFamilies), std::end(kFamilies)}; }

Family parse_family(const std::string& s, const char* field) {
  std::string known;
  for (int i = 0; i < static_cast<int>(std::size(kFamilies)); ++i) {
    if (s == kFamilies[i]) return static_cast<Family>(i);
    known += (i ? " | " : "") + std::string(kFamilies[i]);
  }
  throw ConfigError(field, "unknown family '" + s + "' (" + known + ")");
}

void set_family(ModelConfig& m, Family f) {
  m.family = f;
  const bool gpt2 = f == Family::Gpt2, neox = f == Family::GptNeox, falcon = f == Family::Falcon;
  m.norm = gpt2 || neox || falcon ? NormKind::LayerNorm : NormKind::RmsNorm;
  const bool gemma = f == Family::Gemma || f == Family::Gemma2 || f == Family::Gemma3;
  m.norm_unit_offset = gemma;
  m.placement = f == Family::Olmo2                          ? NormPlacement::Post
                : f == Family::Gemma2 || f == Family::Gemma3 ? NormPlacement::Sandwich
                                                             : NormPlacement::Pre;
  m.position = gpt2 ? PositionKind::Learned : PositionKind::Rope;
  m.block_layout = neox ? BlockLayout::Parallel : falcon ? BlockLayout::ParallelSharedNorm : BlockLayout::Sequential;
  const bool oss = f == Family::GptOss;
  m.qkv_bias = gpt2 || neox || oss || f == Family::Qwen2 || f == Family::Qwen2Moe;
  m.out_bias = gpt2 || neox || oss;
  m.attn_sinks = oss;
  m.mlp_bias = gpt2 || neox;
  m.qk_norm = f == Family::Olmo2 ? QkNormKind::Projection
              : f == Family::Qwen3 || f == Family::Qwen3Moe || f == Family::Gemma3 ? QkNormKind::Head
                                   : QkNormKind::None;
  m.mlp = gpt2 ? MlpKind::GeluTanh
         : neox || falcon ? MlpKind::Gelu
               : gemma ? MlpKind::GeGlu : oss ? MlpKind::SwiGluClamped : MlpKind::SwiGlu;
  m.tied_embeddings = gpt2 || falcon || gemma || f == Family::SmolLM3;
  // Llama 4: RoPE in the complex form (adjacent pairs), the weightless L2 norm of q and k on the
  // blocks with RoPE.
  m.rope_interleaved = f == Family::Llama4;
  if (f == Family::Llama4) m.qk_norm = QkNormKind::HeadL2;
  m.embed_scale = gemma;
  m.window_layers = f == Family::Gemma2 || f == Family::GptOss ? WindowLayers::Even : WindowLayers::All;
  m.window_pattern = f == Family::Gemma3 ? 6 : 0;
  m.rope_local_theta = f == Family::Gemma3 ? 10000.0 : 0.0;
  if (f != Family::DeepseekV2 && f != Family::DeepseekV3) m.mla = MlaConfig{};  // latent attention is DeepSeek's
  if (gpt2) m.kv_heads = m.heads;
}

int ModelConfig::rotary_dim() const {
  if (position != PositionKind::Rope) return 0;
  if (mla.on()) return mla.rope_dim;
  int r = static_cast<int>(std::floor(head_dim() * partial_rotary + 1e-9));
  return r - r % 2;
}

int ModelConfig::window_of(int block) const {
  if (!layer_kinds.empty()) return kind_of(block).window;
  if (sliding_window <= 0) return 0;
  if (window_layers == WindowLayers::Even && block % 2 != 0) return 0;
  if (window_pattern > 0 && (block + 1) % window_pattern == 0) return 0;
  return sliding_window;
}

int ModelConfig::windowed_size() const {
  if (layer_kinds.empty()) return sliding_window;
  int w = 0;  // of the kinds the pattern uses
  for (int i : layer_pattern)
    if (i >= 0 && static_cast<std::size_t>(i) < layer_kinds.size()) w = std::max(w, layer_kinds[static_cast<std::size_t>(i)].window);
  return w;
}

int ModelConfig::chunk_of(int block) const { return layer_kinds.empty() ? 0 : kind_of(block).chunk; }

int ModelConfig::chunked_size() const {
  int c = 0;
  for (int i : layer_pattern)
    if (i >= 0 && static_cast<std::size_t>(i) < layer_kinds.size()) c = std::max(c, layer_kinds[static_cast<std::size_t>(i)].chunk);
  return c;
}

double ModelConfig::rope_base_of(int block) const {
  if (!layer_kinds.empty()) return kind_of(block).rope_theta;
  return rope_local_theta > 0.0 && window_of(block) > 0 ? rope_local_theta : 0.0;
}

bool ModelConfig::rope_in(int block) const {
  return position == PositionKind::Rope && (layer_kinds.empty() || kind_of(block).rope);
}

bool ModelConfig::moe_in(int block) const {
  if (!moe.on()) return false;
  return layer_kinds.empty() || kind_of(block).mlp == LayerMlp::Moe;
}

const LayerKind& ModelConfig::kind_of(int block) const {
  if (layer_pattern.empty()) return layer_kinds.front();  // not valid; validate() refuses it
  const auto at = static_cast<std::size_t>(block) % layer_pattern.size();
  return layer_kinds[static_cast<std::size_t>(layer_pattern[at])];
}

namespace {

void validate_layer_kinds(const ModelConfig& m) {
  if (m.layer_kinds.empty()) {
    if (!m.layer_pattern.empty()) throw ConfigError("layer_pattern", "needs layer_kinds to name");
    return;
  }
  if (m.layer_pattern.empty()) throw ConfigError("layer_pattern", "must give a kind to each layer (layer_kinds are listed)");
  for (std::size_t i = 0; i < m.layer_kinds.size(); ++i) {
    const LayerKind& k = m.layer_kinds[i];
    const std::string field = "layer_kinds." + (k.name.empty() ? std::to_string(i) : k.name);
    if (k.name.empty()) throw ConfigError(field, "has no name");
    for (std::size_t j = 0; j < i; ++j)
      if (m.layer_kinds[j].name == k.name) throw ConfigError(field, "is listed twice");
    if (k.window < 0) throw ConfigError(field + ".window", "must be 0 (full attention) or a positive window, got " + std::to_string(k.window));
    if (k.chunk < 0) throw ConfigError(field + ".chunk", "must be 0 (no chunks) or a positive chunk, got " + std::to_string(k.chunk));
    if (k.chunk > 0 && k.window > 0)
      throw ConfigError(field + ".chunk", "and window are both given; a layer attends through one or the other");
    if (!(std::isfinite(k.rope_theta) && k.rope_theta >= 0.0))
      throw ConfigError(field + ".rope_theta", "must be 0 (the model's) or a positive base");
    if (k.rope_theta > 0.0 && m.position != PositionKind::Rope)
      throw ConfigError(field + ".rope_theta", "needs rotary positions (position rope)");
    if (!k.rope && m.position != PositionKind::Rope)
      throw ConfigError(field + ".rope", "false leaves out rotary positions, which the model does not have (position rope)");
    if (!k.rope && k.rope_theta > 0.0)
      throw ConfigError(field + ".rope_theta", "is given for a kind without RoPE (rope: false)");
    if (k.mlp == LayerMlp::Moe && !m.moe.on())
      throw ConfigError(field + ".mlp", "moe needs the model's experts (a \"moe\" object with experts, top_k, ffn)");
  }
  for (std::size_t b = 0; b < m.layer_pattern.size(); ++b)
    if (m.layer_pattern[b] < 0 || static_cast<std::size_t>(m.layer_pattern[b]) >= m.layer_kinds.size())
      throw ConfigError("layer_pattern", "entry " + std::to_string(b) + " is not one of the " +
                                             std::to_string(m.layer_kinds.size()) + " layer kinds");
  for (int i : m.layer_pattern)
    if (const LayerKind& k = m.layer_kinds[static_cast<std::size_t>(i)]; k.window > 0 && k.window != m.windowed_size())
      throw ConfigError("layer_kinds." + k.name + ".window", std::to_string(k.window) + " where another kind's is " +
                                                              std::to_string(m.windowed_size()) +
                                                              ": windows of several sizes are not modelled yet");
  for (int i : m.layer_pattern)
    if (const LayerKind& k = m.layer_kinds[static_cast<std::size_t>(i)]; k.chunk > 0 && k.chunk != m.chunked_size())
      throw ConfigError("layer_kinds." + k.name + ".chunk", std::to_string(k.chunk) + " where another kind's is " +
                                                             std::to_string(m.chunked_size()) +
                                                             ": chunks of several sizes are not modelled yet");
  if (m.chunked_size() > 0 && m.windowed_size() > 0)
    throw ConfigError("layer_kinds", "give sliding windows and attention chunks to different layers: both in one model are not modelled yet");
  if (m.moe.on() && std::none_of(m.layer_pattern.begin(), m.layer_pattern.end(), [&](int i) {
        return m.layer_kinds[static_cast<std::size_t>(i)].mlp == LayerMlp::Moe;
      }))
    throw ConfigError("moe", "is given, but no layer of the pattern is of a kind with mlp moe");
  if (m.sliding_window != 0)
    throw ConfigError("sliding_window", "is given by the layer kinds (layer_kinds) where they are listed; set it 0");
}

}  // namespace

double ModelConfig::score_scale(int block) const {
  double s = attn_scale > 0.0 ? attn_scale : 1.0 / std::sqrt(static_cast<double>(head_dim()));
  if (attn_scale_inverse_layer) s /= static_cast<double>(block + 1);
  return s;
}

float ModelConfig::embed_multiplier() const {
  if (!embed_scale) return static_cast<float>(embedding_multiplier);
  const float s = static_cast<float>(std::sqrt(static_cast<double>(hidden)));
  return dtype == DType::BF16 ? round_bf16(s) : s;
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

void require_number(const char* field, double v, bool allow_zero) {
  if (!std::isfinite(v) || v < 0.0 || (!allow_zero && v == 0.0))
    throw ConfigError(field, std::string("must be a ") + (allow_zero ? "non-negative" : "positive") +
                                 " number, got " + std::to_string(v));
}

// Multi-head latent attention's sizes, and the features it is modelled with.
void validate_latent_attention(const ModelConfig& m) {
  validate_mla(m.mla, m.hidden);
  // The packed q|k|v row, in int: heads · (2 · (nope + rope) + v) must fit.
  const long double row = static_cast<long double>(m.heads) * (2.0L * m.mla.qk_dim() + m.mla.v_dim);
  if (!(row < 2147483647.0L))
    throw ConfigError("mla", "heads x (2 x (nope_dim + rope_dim) + v_dim) = " + std::to_string(static_cast<double>(row)) +
                                 " is more than 2^31 - 1 values a token");
  if (m.family != Family::DeepseekV2 && m.family != Family::DeepseekV3)
    throw ConfigError("mla", std::string("latent attention's tensors are named in deepseek_v2 and deepseek_v3 only, not ") +
                                 to_string(m.family));
  for (int k : m.layer_pattern)  // the kinds the layers use
    if (k >= 0 && k < static_cast<int>(m.layer_kinds.size()) && !m.layer_kinds[static_cast<std::size_t>(k)].rope)
      throw ConfigError("layer_kinds", "layer kind '" + m.layer_kinds[static_cast<std::size_t>(k)].name +
                                           "' has no RoPE; latent attention always rotates its rope_dim dims");
  if (m.kv_heads != m.heads)
    throw ConfigError("kv_heads", "latent attention gives every head its own keys: kv_heads (" + std::to_string(m.kv_heads) +
                                      ") must equal heads (" + std::to_string(m.heads) + ")");
  if (m.position != PositionKind::Rope) throw ConfigError("mla", "latent attention rotates its rope_dim dims: position must be rope");
  if (m.qkv_bias || m.out_bias) throw ConfigError("attention_bias", "biases on latent attention's projections are not modelled");
  if (m.qk_norm != QkNormKind::None) throw ConfigError("qk_norm", "latent attention norms its latents, not q and k: qk_norm must be none");
  if (m.block_layout != BlockLayout::Sequential) throw ConfigError("mla", "latent attention needs a sequential block");
  if (m.partial_rotary != 1.0)
    throw ConfigError("partial_rotary_factor", "latent attention rotates mla.rope_dim dims; leave partial_rotary_factor at 1");
  if (m.rope_interleaved)
    throw ConfigError("rope_interleaved", "latent attention's rotation is its own (mla_pack); leave rope_interleaved false");
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
  if (head_size < 0) throw ConfigError("head_dim", "must be a positive integer, got " + std::to_string(head_size));
  if (layers > limits::kLayers)
    throw LimitError("layers: " + std::to_string(layers) + " is more than the " +
                     std::to_string(limits::kLayers) + " layers a model may have");
  if (head_size == 0 && !mla.on() && hidden % heads != 0)
    throw ConfigError("hidden", std::to_string(hidden) + " is not divisible by heads = " +
                                    std::to_string(heads) + " (or give head_dim)");
  if (heads % kv_heads != 0)
    throw ConfigError("kv_heads", std::to_string(kv_heads) + " does not divide heads = " +
                                      std::to_string(heads));
  if (family == Family::Gpt2 && kv_heads != heads)
    throw ConfigError("kv_heads", "gpt2 has no grouped-query attention: kv_heads (" +
                                      std::to_string(kv_heads) + ") must equal heads (" +
                                      std::to_string(heads) + ")");
  if (mla.on() || mla != MlaConfig{}) validate_latent_attention(*this);
  if ((family == Family::DeepseekV2 || family == Family::DeepseekV3) && !mla.on())
    throw ConfigError("mla", std::string(to_string(family)) + "'s attention is latent: give the mla object (kv_rank, "
                             "nope_dim, rope_dim, v_dim; docs/model-config.md)");
  if (position == PositionKind::Rope) {
    if (!(partial_rotary > 0.0 && partial_rotary <= 1.0))
      throw ConfigError("partial_rotary_factor", "must be in (0, 1], got " + std::to_string(partial_rotary));
    if (rotary_dim() < 2 || (partial_rotary == 1.0 && !mla.on() && head_dim() % 2 != 0))
      throw ConfigError("head_dim", "RoPE needs an even head dimension, got " + std::to_string(head_dim()));
  }
  if (rope_interleaved && position != PositionKind::Rope)
    throw ConfigError("rope_interleaved", "needs rotary positions (position rope)");
  if (attn_temperature_floor < 0)
    throw ConfigError("attn_temperature_floor", "must be 0 (no temperature tuning) or a positive position count, got " +
                                                    std::to_string(attn_temperature_floor));
  if (attn_temperature_floor > 0 && !(std::isfinite(attn_temperature_scale) && attn_temperature_scale >= 0.0 &&
                                      attn_temperature_scale <= 1e3))
    throw ConfigError("attn_temperature_scale", "must be a number from 0 to 1000, got " + std::to_string(attn_temperature_scale));
  if (attn_temperature_floor > 0 && position != PositionKind::Rope)
    throw ConfigError("attn_temperature_floor", "tunes the blocks without RoPE among blocks with it (position rope, layer kinds with rope false)");
  if (position == PositionKind::Rope) {
    RopeProblems problems;
    validate_rope_scaling(rope_scaling, rotary_dim(), positions, problems);
    if (!problems.empty()) throw ConfigError(problems[0].first, problems[0].second);
  }
  if (position == PositionKind::Learned && seq > positions)
    throw ConfigError("seq", std::to_string(seq) + " exceeds the position table (positions = " +
                                 std::to_string(positions) + ")");
  if (!(dropout >= 0.0 && dropout < 1.0))
    throw ConfigError("dropout", "must be in [0, 1), got " + std::to_string(dropout));
  if (dropout_sites & ~static_cast<unsigned>(kDropAll))
    throw ConfigError("dropout_sites", "unknown site bits " + std::to_string(dropout_sites));
  require_number("norm_eps", norm_eps, false);
  require_number("rope_theta", rope_theta, false);
  require_number("attn_scale", attn_scale, true);
  require_number("attn_softcap", attn_softcap, true);
  require_number("final_softcap", final_softcap, true);
  require_number("embedding_multiplier", embedding_multiplier, false);
  require_number("residual_multiplier", residual_multiplier, false);
  require_number("logits_scaling", logits_scaling, false);
  require_number("swiglu_limit", swiglu_limit, false);
  if (const float l = static_cast<float>(swiglu_limit); !(l > 0.0f) || !std::isfinite(l))
    throw ConfigError("swiglu_limit", "must be a positive number a float holds (the kernels clamp in fp32), got " +
                                          [&] {
                                            std::ostringstream o;
                                            o << swiglu_limit;
                                            return o.str();
                                          }());
  if (embed_scale && embedding_multiplier != 1.0)
    throw ConfigError("embedding_multiplier", "and embed_scale both scale the embeddings; set one");
  if (sliding_window < 0)
    throw ConfigError("sliding_window", "must be 0 (none) or a positive window, got " +
                                            std::to_string(sliding_window));
  if (window_pattern < 0 || window_pattern == 1)
    throw ConfigError("sliding_window_pattern", "must be 0 (none) or at least 2, got " + std::to_string(window_pattern));
  if (window_pattern > 0 && window_layers != WindowLayers::All)
    throw ConfigError("sliding_window_pattern", "and sliding_window_layers " + std::string(to_string(window_layers)) +
                                                    " both pick the windowed blocks; set one");
  require_number("rope_local_theta", rope_local_theta, true);
  if (moe.on() || moe.experts != 0) validate_moe(moe);
  validate_layer_kinds(*this);
  if (moe.on() && (family == Family::Gpt2 || family == Family::GptNeox || family == Family::Falcon))
    throw ConfigError("moe", std::string("experts in a ") + to_string(family) +
                                 " block are not modelled (its MLP tensors have no per-expert names)");
  if (moe.on() && mlp_bias)
    throw ConfigError("mlp_bias", "biases on the experts' projections are not modelled (a model with experts takes mlp_bias false)");
  if (moe.on() && block_layout != BlockLayout::Sequential)
    throw ConfigError("moe", "experts need a sequential block (block_layout sequential)");
  if (qk_norm == QkNormKind::HeadL2 && position != PositionKind::Rope)
    throw ConfigError("qk_norm", "head_l2 norms q and k on the blocks with RoPE, and the model has no rotary positions (position rope)");
  if (qk_norm == QkNormKind::Projection && norm_unit_offset)
    throw ConfigError("qk_norm", "projection-wide QK-norm scales by w, not (1 + w); per head (head) takes norm_unit_offset");
  if (block_layout != BlockLayout::Sequential && placement != NormPlacement::Pre)
    throw ConfigError("block_layout", std::string(to_string(block_layout)) + " blocks norm their input (norm_placement pre), not " +
                                          to_string(placement));
  if (norm_unit_offset && norm != NormKind::RmsNorm)
    throw ConfigError("norm_unit_offset", "applies to rmsnorm only");
  if (dtype != DType::BF16 && dtype != DType::F32)
    throw ConfigError("dtype", std::string("must be bf16 or fp32, got ") + to_string(dtype));
  // Byte counts: the s^2 attention tensor, the widest activation, the parameter count x 16.
  long double s = seq, b = batch, a = heads, h = hidden, f = ffn, V = vocab, L = layers,
              q = q_width(), kv = kv_width();
  if (mul_overflows({b, a, s, s, 4}))
    throw ConfigError("seq", "batch x heads x seq^2 overflows 64-bit byte counts (seq = " +
                                 std::to_string(seq) + ")");
  if (mul_overflows({b, s, V, 4}) || mul_overflows({b, s, f, 8}) || mul_overflows({b, s, h, 8}) ||
      mul_overflows({b, s, static_cast<long double>(qkv_width()), 8}))
    throw ConfigError("batch", "activation byte counts overflow 64 bits");
  if (moe.on()) {  // the routing table's rows are i32
    const long double rows = moe.capacity_factor > 0.0
                                 ? std::ceil(b * s * moe.top_k / moe.experts * static_cast<long double>(moe.capacity_factor)) * moe.experts
                                 : b * s * moe.top_k;
    if (!(rows < 2147483647.0L))
      throw ConfigError(moe.capacity_factor > 0.0 ? "moe.capacity_factor" : "moe.top_k",
                        "gives " + std::to_string(static_cast<double>(rows)) +
                            " rows of experts' tokens, more than 2^31 - 1 (batch x seq x top_k)");
  }
  const long double ef = moe.on() ? static_cast<long double>(moe.experts) * moe.ffn + moe.experts + moe.shared_ffn + 1 : 0;
  if (moe.on() && (mul_overflows({b, s, static_cast<long double>(moe.top_k), std::max<long double>(h, 2 * static_cast<long double>(moe.ffn)), 8}) ||
                   mul_overflows({static_cast<long double>(moe.capacity(tokens())), static_cast<long double>(moe.experts), std::max<long double>(h, 2 * static_cast<long double>(moe.ffn)), 8})))
    throw ConfigError("moe", "expert buffer byte counts overflow 64 bits");
  long double params = L * (2 * h * q + 2 * h * kv + (gated_mlp() ? 3 : 2) * h * (f + ef) + 8 * h + 2 * q) +
                       V * h * (tied_embeddings ? 1 : 2) + positions * h;
  if (mul_overflows({params, 16}))
    throw ConfigError("layers", "parameter byte counts overflow 64 bits");
}

}  // namespace remat
