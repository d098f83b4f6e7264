// Multi-head latent attention (DeepSeek-V2/V3): the queries through a low-rank projection (or a
// plain one), the keys' and values' per-head parts up-projected from one normed latent shared by
// all heads, and one rotated key part every head shares. Described once here; a model with
// kv_rank > 0 has it in every layer.
//
// Per token: q = W_qb · rmsnorm(W_qa · x) (q_rank 0: q = W_q · x), heads × (nope_dim + rope_dim);
// latent = rmsnorm(W_kva · x) (kv_rank wide), k_pe = W_kpe · x (rope_dim, shared by the heads);
// W_kvb · latent gives each head's k part (nope_dim) and its value (v_dim). The last rope_dim
// dims of each q head and k_pe are rotated; a q and k head is nope_dim + rope_dim wide, a value
// head v_dim. W_kva and W_kpe are Hugging Face's one kv_a_proj_with_mqa, split by rows.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace remat {

struct MlaConfig {
  int q_rank = 0;   // the queries' low rank (q_lora_rank); 0: a plain q projection
  int kv_rank = 0;  // the keys' and values' latent (kv_lora_rank); 0: no latent attention
  int nope_dim = 0, rope_dim = 0, v_dim = 0;  // qk_nope_head_dim, qk_rope_head_dim, v_head_dim
  bool operator==(const MlaConfig&) const = default;

  bool on() const { return kv_rank > 0; }
  int qk_dim() const { return nope_dim + rope_dim; }
};

// Our model JSON's "mla" object: {"q_rank", "kv_rank", "nope_dim", "rope_dim", "v_dim"}
// (q_rank optional). ConfigError naming the key for anything else or a bad value.
MlaConfig mla_from_json(const nlohmann::json& j);
nlohmann::json mla_to_json(const MlaConfig& m);
// Throws ConfigError naming the field and the numbers (ranks above the hidden size, odd or
// missing rotated dims).
void validate_mla(const MlaConfig& m, int hidden);
// In words, for plan's summary: the ranks and the heads' widths.
std::string describe_mla(const MlaConfig& m, int heads);

}  // namespace remat
