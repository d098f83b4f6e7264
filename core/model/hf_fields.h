// Internal to the Hugging Face import (hf_config.cpp, hf_families.cpp): the problem collector
// and the field readers. Readers throw ConfigError naming the field.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/model/model_config.h"
#include "core/util/error.h"

namespace remat::hf {

// Every problem of a config, so one run reports them all: each check runs, what it throws is
// kept with its field, and the import fails at the end with the whole list.
class Problems {
 public:
  // f() or, when it throws a ConfigError, `fallback` with the problem kept.
  template <class T, class F>
  T take(F f, T fallback) {
    try {
      return f();
    } catch (const ConfigError& e) {
      keep(e);
      return fallback;
    }
  }
  template <class F>
  void check(F f) {
    take([&] { f(); return 0; }, 0);
  }
  void add(const std::string& field, const std::string& message) { list_.emplace_back(field, message); }
  bool empty() const { return list_.empty(); }
  // Throws ConfigProblems: a ConfigError naming the first field, its message saying every
  // problem, and the list itself.
  void throw_if_any() const {
    if (list_.empty()) return;
    std::string msg = list_[0].second;
    for (std::size_t i = 1; i < list_.size(); ++i) msg += "; also " + list_[i].first + ": " + list_[i].second;
    if (list_.size() > 1) msg += " (" + std::to_string(list_.size()) + " problems)";
    throw ConfigProblems(list_, msg);
  }

 private:
  void keep(const ConfigError& e) {
    std::string what = e.what();
    const std::string prefix = e.field() + ": ";
    add(e.field(), what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what);
  }
  std::vector<std::pair<std::string, std::string>> list_;
};

const nlohmann::json& field(const nlohmann::json& j, const char* key);
int int_field(const nlohmann::json& j, const char* key);  // required, > 0
int int_field(const nlohmann::json& j, const char* key, int fallback);  // absent or null: fallback
double num_field(const nlohmann::json& j, const char* key, double fallback);
bool bool_field(const nlohmann::json& j, const char* key, bool fallback);
std::string string_field(const nlohmann::json& j, const char* key, const std::string& fallback);
// A boolean field that must have `modelled` (its Hugging Face default) for the step we run.
void require_flag(const nlohmann::json& j, const char* key, bool modelled, const std::string& why);
// Fields neither modelled nor packaging are problems; packaging fields are listed as ignored.
void sort_fields(const nlohmann::json& j, const std::set<std::string>& modelled, Problems& p,
                 std::vector<std::string>& ignored);

// A dropout probability read from a config field, and the sites it covers.
struct DropoutField {
  const char* field;
  double p;
  unsigned sites;
};
// One probability for the sites whose fields are non-zero; differing non-zero values are a problem.
void set_dropout(ModelConfig& m, Problems& p, const std::vector<DropoutField>& fields);
// GPT-NeoX's and Falcon's dropouts: attention_dropout on the probabilities, hidden_dropout on both
// branches' outputs.
void set_attention_hidden_dropout(ModelConfig& m, Problems& p, const nlohmann::json& j);
// `rope_scaling` when present and not null, its problems kept.
void read_rope_scaling(ModelConfig& m, Problems& p, const nlohmann::json& j);

// The Llama-like families (hf_families.cpp).
std::optional<Family> hf_family(const std::string& model_type);
std::vector<std::string> hf_family_types();
// The mixture-of-experts families' own fields, and their reading into m.moe (and layer kinds where
// dense layers are among sparse ones) (hf_moe.cpp).
std::set<std::string> moe_fields(Family f);
void read_moe(const nlohmann::json& j, ModelConfig& m, Problems& p);
// The layer indices j[key] lists (Qwen3-MoE's mlp_only_layers, Llama 4's moe_layers); an entry
// that is not an index below `layers`, or a value that is not a list, is a problem.
std::vector<int> layer_indices(const nlohmann::json& j, const char* key, int layers, Problems& p);
// router_aux_loss_coef (the load-balancing loss's, read under output_router_logits), in [0, 1e6].
double aux_loss_coef(const nlohmann::json& j, double fallback, Problems& p);
// Layer kinds for a model whose layers differ in their MLP (sparse[l]: layer l has the experts).
void apply_sparse_layers(ModelConfig& m, const std::vector<bool>& sparse);
// deepseek_v2 and deepseek_v3: their latent attention and experts (hf_deepseek.cpp).
std::set<std::string> deepseek_fields();
void read_deepseek(const nlohmann::json& j, ModelConfig& m, Problems& p);
// gpt_oss: its own fields, GptOssConfig's defaults for absent ones (before the shared fields are
// read; rope_given: the config has rope_scaling or rope_parameters), and its experts (hf_gpt_oss.cpp).
std::set<std::string> gpt_oss_fields();
void gpt_oss_defaults(nlohmann::json& j, bool rope_given);
void read_gpt_oss(const nlohmann::json& j, ModelConfig& m, Problems& p);
// SmolLM3's per-layer `no_rope_layers` (and no_rope_layer_interval) as layer kinds.
void apply_no_rope_layers(const nlohmann::json& j, ModelConfig& m, Problems& p);
// The layers that rotate by `no_rope_layers` (absent or null: transformers' default from
// no_rope_layer_interval; empty: that too when empty_is_default, as Llama 4 reads it); empty
// when refused (the problem kept).
std::vector<bool> rope_layers(const nlohmann::json& j, int layers, Problems& p, bool empty_is_default);
// llama4_text: its own fields, Llama4TextConfig's defaults for absent ones (before the shared
// fields are read), and its layers (hf_llama4.cpp). `layer_types` stays in j for it.
std::set<std::string> llama4_fields();
void llama4_defaults(nlohmann::json& j);
void read_llama4(const nlohmann::json& j, ModelConfig& m, Problems& p);
void check_sizes(const ModelConfig& m, Problems& p);
ModelConfig gpt2_from_hf(const nlohmann::json& j, Problems& p, std::vector<std::string>& ignored);
ModelConfig gpt_neox_from_hf(const nlohmann::json& j, Problems& p, std::vector<std::string>& ignored);  // hf_gpt_neox.cpp
// model_type falcon, RefinedWeb or RefinedWebModel (hf_falcon.cpp).
ModelConfig falcon_from_hf(const nlohmann::json& j, const std::string& type, Problems& p,
                           std::vector<std::string>& ignored);
ModelConfig decoder_from_hf(const nlohmann::json& j, Family f, Problems& p,
                            std::vector<std::string>& ignored);

}  // namespace remat::hf
