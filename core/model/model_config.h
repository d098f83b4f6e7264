// The model a run trains: architecture, sizes, attention implementation, dtype.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace remat {

enum class Architecture { Gpt2, Llama };
enum class AttentionImpl { Naive, Flash };
enum class DType : std::uint8_t { F32, BF16, U8, I32 };

std::size_t dtype_size(DType t);
const char* to_string(Architecture a);
const char* to_string(AttentionImpl a);
const char* to_string(DType t);

struct ModelConfig {
  std::string name = "custom";
  Architecture arch = Architecture::Gpt2;
  int layers = 2;
  int hidden = 64;
  int heads = 4;
  int kv_heads = 4;
  int ffn = 256;
  int seq = 32;
  int batch = 2;
  int vocab = 256;
  int positions = 32;  // rows of the learned position table (gpt2); >= seq
  double dropout = 0.0;
  AttentionImpl attention = AttentionImpl::Naive;
  DType dtype = DType::BF16;  // activations, parameters and their gradients
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  // Fields of an imported config that do not change a training step (tokenizer ids, packaging,
  // inference settings): accepted, and listed by plan and run. Not part of the model's JSON.
  std::vector<std::string> ignored_fields;

  int head_dim() const { return hidden / heads; }
  // Width of the fused Q|K|V projection.
  int qkv_width() const { return (heads + 2 * kv_heads) * head_dim(); }
  std::int64_t tokens() const { return static_cast<std::int64_t>(batch) * seq; }
  std::size_t act_size() const { return dtype_size(dtype); }
  bool has_dropout() const { return dropout > 0.0; }

  // Throws ConfigError naming the first bad field and its value.
  void validate() const;
};

// Our own JSON keys (see docs/model-config.md). Unknown keys are refused by name.
ModelConfig model_from_json(const nlohmann::json& j);
nlohmann::json model_to_json(const ModelConfig& m);

// A Hugging Face config.json (GPT-2 or Llama field names). Fields we do not model are refused.
ModelConfig model_from_hf_json(const nlohmann::json& j, const std::string& name);

// Reads a file: our format, or a Hugging Face config.json (detected by `model_type`).
ModelConfig load_model_file(const std::string& path);

}  // namespace remat
