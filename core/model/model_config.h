// The model a run trains: its family, the features of its block, sizes, attention
// implementation and dtype. A family (gpt2, llama, ...) is a preset of features plus its
// Hugging Face tensor names; every feature can be set on its own (docs/model-config.md).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/model/layer_kind.h"
#include "core/model/mla_config.h"
#include "core/model/moe_config.h"
#include "core/model/rope_scaling.h"

namespace remat {

enum class Family : std::uint8_t { Gpt2, Llama, Mistral, Qwen2, Gemma, Gemma2, Phi3, Olmo2, Qwen3, Granite,
                                   GptNeox, Falcon, Gemma3, SmolLM3, Mixtral, Qwen3Moe, Qwen2Moe,
                                   DeepseekV2, DeepseekV3, GptOss, Llama4 };
enum class AttentionImpl { Naive, Flash };
enum class DType : std::uint8_t { F32, BF16, U8, I32 };
enum class NormKind : std::uint8_t { LayerNorm, RmsNorm };
// pre: x + f(norm(x)); post (OLMo 2): x + norm(f(x)); sandwich (Gemma 2): x + norm(f(norm(x))).
enum class NormPlacement : std::uint8_t { Pre, Post, Sandwich };
enum class PositionKind : std::uint8_t { Learned, Rope };
// gelu_tanh / gelu: fc, activation, fc2. swiglu: silu(gate) * up. geglu: gelu_tanh(gate) * up.
// swiglu_clamped (gpt-oss): g = min(gate, limit), u = clamp(up, -limit, limit),
// (u + 1) * g * sigmoid(1.702 * g), limit = swiglu_limit.
enum class MlpKind : std::uint8_t { GeluTanh, Gelu, SwiGlu, GeGlu, SwiGluClamped };
enum class WindowLayers : std::uint8_t { All, Even };
// RMSNorm of q and k before RoPE: none; over the whole q and k projections (OLMo 2: weights
// heads·d and kv_heads·d wide); over each head (Qwen3: one weight of d for the q heads, one for
// the k heads); per head without a weight, on the blocks with RoPE only and after RoPE (Llama 4's
// L2 norm, x · rsqrt(mean(x²) + eps)).
enum class QkNormKind : std::uint8_t { None, Projection, Head, HeadL2 };
// sequential: the MLP reads the attention's residual sum; parallel (GPT-NeoX): x + attn(ln1(x))
// + mlp(ln2(x)); parallel_shared_norm (Falcon 7B): both branches read one norm of x.
enum class BlockLayout : std::uint8_t { Sequential, Parallel, ParallelSharedNorm };

// Where dropout applies (bits).
enum DropoutSites : unsigned { kDropEmbedding = 1, kDropAttention = 2, kDropResidual = 4,
                               kDropAll = 7 };

std::size_t dtype_size(DType t);
const char* to_string(Family f);
const char* to_string(AttentionImpl a);
const char* to_string(DType t);
const char* to_string(NormKind k);
const char* to_string(NormPlacement p);
const char* to_string(PositionKind k);
const char* to_string(MlpKind k);
const char* to_string(WindowLayers w);
const char* to_string(QkNormKind k);
const char* to_string(BlockLayout b);
// Throws ConfigError(field, ...) naming the known values.
Family parse_family(const std::string& s, const char* field);
std::vector<std::string> family_names();

struct ModelConfig {
  std::string name = "custom";
  Family family = Family::Gpt2;
  int layers = 2;
  int hidden = 64;
  int heads = 4;
  int kv_heads = 4;
  int head_size = 0;  // 0: hidden / heads
  int ffn = 256;
  int seq = 32;
  int batch = 2;
  int vocab = 256;
  int positions = 32;  // rows of the learned position table; the RoPE context (max positions)
  double dropout = 0.0;
  unsigned dropout_sites = kDropAll;
  AttentionImpl attention = AttentionImpl::Naive;
  DType dtype = DType::BF16;  // activations, parameters and their gradients
  double norm_eps = 1e-5;

  // --- features (set together by a family, each may be changed) ---
  NormKind norm = NormKind::LayerNorm;
  bool norm_unit_offset = false;  // RMSNorm weight applied as (1 + w)
  NormPlacement placement = NormPlacement::Pre;
  BlockLayout block_layout = BlockLayout::Sequential;
  PositionKind position = PositionKind::Learned;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double partial_rotary = 1.0;  // fraction of head_dim rotated
  bool rope_interleaved = false;  // RoPE pairs adjacent dims (2i, 2i + 1), Llama 4's complex form
  // Llama 4's attention temperature tuning on the blocks without RoPE (core/util/attn_temperature.h):
  // q of position s times log(floor((s + 1) / attn_temperature_floor) + 1) · attn_temperature_scale
  // + 1. 0: none.
  int attn_temperature_floor = 0;
  double attn_temperature_scale = 0.1;
  bool qkv_bias = true, out_bias = true, mlp_bias = true;
  QkNormKind qk_norm = QkNormKind::None;
  int sliding_window = 0;       // 0: none
  WindowLayers window_layers = WindowLayers::All;
  // > 0 (Gemma 3's 6): blocks b with (b + 1) % window_pattern == 0 attend globally, the others
  // through the window. 0: window_layers decides.
  int window_pattern = 0;
  // > 0 (Gemma 3's rope_local_base_freq): windowed blocks rotate with this base and without
  // rope_scaling, which then applies to the global blocks only. 0: every block alike.
  double rope_local_theta = 0.0;
  double attn_scale = 0.0;      // 0: 1/sqrt(head_dim)
  bool attn_scale_inverse_layer = false;  // scores also / (layer + 1)
  double attn_softcap = 0.0, final_softcap = 0.0;  // 0: none
  // gpt-oss's attention sinks: per head one learned logit (attn.sinks) that joins every query's
  // softmax as a column with no value, so the keys' weights sum to less than 1.
  bool attn_sinks = false;
  MlpKind mlp = MlpKind::GeluTanh;
  double swiglu_limit = 7.0;    // swiglu_clamped's clamp (gpt-oss's swiglu_limit)
  bool tied_embeddings = true;
  bool embed_scale = false;     // embeddings * sqrt(hidden), the factor in the model's dtype
  // Granite's multipliers (1: none): the embeddings times embedding_multiplier, each branch
  // (attention, MLP) times residual_multiplier before its residual add, the logits divided by
  // logits_scaling. (Its attention_multiplier is attn_scale.)
  double embedding_multiplier = 1.0, residual_multiplier = 1.0, logits_scaling = 1.0;

  // Per-layer kinds (layer_kind.h): when `layer_kinds` is not empty, layer b is of kind
  // layer_kinds[layer_pattern[b % layer_pattern.size()]] (a pattern repeats; Hugging Face's
  // layer_types gives one entry per layer), which alone gives its window and RoPE base
  // (sliding_window must then be 0; window_layers, window_pattern and rope_local_theta are not
  // read).
  std::vector<LayerKind> layer_kinds;
  std::vector<int> layer_pattern;

  // The mixture of experts of the MoE layers (moe_config.h): those whose kind says mlp moe, or
  // every layer when no kinds are listed and moe.experts > 0. Dense layers use `ffn`.
  MoeConfig moe;
  // Multi-head latent attention in every layer (mla_config.h) when mla.kv_rank > 0: head_dim is
  // then nope_dim + rope_dim (the q and k heads), the value heads v_dim, kv_heads = heads.
  MlaConfig mla;

  // Fields of an imported config that do not change a training step (tokenizer ids, packaging,
  // inference settings): accepted, and listed by plan and in a run's summary.json
  // (`ignored_config_fields`). Not part of the model's JSON.
  std::vector<std::string> ignored_fields;

  int head_dim() const { return mla.on() ? mla.qk_dim() : head_size > 0 ? head_size : hidden / heads; }
  int v_head_dim() const { return mla.on() ? mla.v_dim : head_dim(); }  // a value head's width
  int q_width() const { return heads * head_dim(); }
  int kv_width() const { return kv_heads * head_dim(); }
  // Width of the packed Q|K|V the attention reads (the fused projection's, without latents).
  int qkv_width() const { return q_width() + kv_width() + kv_heads * v_head_dim(); }
  // Width of the attention's context (the output projection's input).
  int ctx_width() const { return heads * v_head_dim(); }
  int rotary_dim() const;  // even, <= head_dim; 0 without RoPE
  bool gated_mlp() const { return mlp == MlpKind::SwiGlu || mlp == MlpKind::GeGlu || mlp == MlpKind::SwiGluClamped; }
  std::int64_t tokens() const { return static_cast<std::int64_t>(batch) * seq; }
  std::size_t act_size() const { return dtype_size(dtype); }
  bool has_dropout() const { return dropout > 0.0 && dropout_sites != 0; }
  bool drops(DropoutSites site) const { return dropout > 0.0 && (dropout_sites & site); }
  // The kind of a block (layer_kinds not empty).
  const LayerKind& kind_of(int block) const;
  // The window of a block (0: none).
  int window_of(int block) const;
  // The window of the windowed blocks (all have one size; 0: none).
  int windowed_size() const;
  // The attention chunk of a block (0: none; Llama 4's chunked layers), and of the chunked
  // blocks (all have one size; a model has windows or chunks, not both).
  int chunk_of(int block) const;
  int chunked_size() const;
  // The RoPE base a block rotates with on its own, without rope_scaling; 0: the model's
  // rope_theta with its rope_scaling.
  double rope_base_of(int block) const;
  // Whether block `block`'s MLP is the mixture of experts.
  bool moe_in(int block) const;
  // Whether a block rotates its queries and keys (position rope, and its kind does not say
  // rope: false).
  bool rope_in(int block) const;
  // Score scale of a block.
  double score_scale(int block) const;
  // The embeddings' factor: sqrt(hidden) rounded to the model's dtype with embed_scale (as
  // Hugging Face's Gemma), else embedding_multiplier.
  float embed_multiplier() const;

  // Throws ConfigError naming the first bad field and its value.
  void validate() const;
};

// The features of a family, with this config's sizes kept.
void set_family(ModelConfig& m, Family f);

// Our own JSON keys (see docs/model-config.md). Unknown keys are refused by name.
ModelConfig model_from_json(const nlohmann::json& j);
nlohmann::json model_to_json(const ModelConfig& m);

// A Hugging Face config.json (model_type gpt2, llama, mistral, qwen2, qwen3, gemma, gemma2,
// phi3, olmo2, granite, gpt_neox, gemma3_text, falcon and its first names RefinedWeb, RefinedWebModel). Fields we do not model are refused, all of them at once.
ModelConfig model_from_hf_json(const nlohmann::json& j, const std::string& name);

// Reads a file: our format, or a Hugging Face config.json (detected by `model_type`).
ModelConfig load_model_file(const std::string& path);

}  // namespace remat
