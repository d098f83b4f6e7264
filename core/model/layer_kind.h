// Layer kinds: what may differ from one layer of a model to the next. A model's layers are all of
// one kind, given by its features (model_config.h: sliding_window with its window_layers or
// window_pattern, rope_local_theta), unless it lists kinds and a pattern assigning one to every
// layer (ModelConfig::layer_kinds, layer_pattern), as Hugging Face's `layer_types` does.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace remat {

// The MLP of a layer kind: dense, or a mixture of experts (not modelled yet: refused).
enum class LayerMlp : std::uint8_t { Dense, Moe };
const char* to_string(LayerMlp m);

struct LayerKind {
  std::string name;         // e.g. "sliding_attention", "full_attention"
  int window = 0;           // attention through a sliding window of this many tokens; 0: full
  double rope_theta = 0.0;  // this kind's own RoPE base, without rope_scaling; 0: the model's
  bool rope = true;         // false: no rotary embedding (NoPE): the block has no RoPE step
  LayerMlp mlp = LayerMlp::Dense;
  int chunk = 0;            // attention within chunks of this many tokens (Llama 4); 0: none
  bool operator==(const LayerKind&) const = default;
};

// Our model JSON's "layer_kinds" (a list of {"name", "window", "chunk", "rope_theta", "rope", "mlp"}, all
// but the name optional) and "layer_pattern" (kind names, repeated over the layers): the kinds,
// and each pattern entry's index into them. ConfigError naming the key for anything else.
std::vector<LayerKind> layer_kinds_from_json(const nlohmann::json& kinds);
std::vector<int> layer_pattern_from_json(const nlohmann::json& pattern, const std::vector<LayerKind>& kinds);
nlohmann::json layer_kinds_to_json(const std::vector<LayerKind>& kinds);
nlohmann::json layer_pattern_to_json(const std::vector<int>& pattern, const std::vector<LayerKind>& kinds);

}  // namespace remat
