#include "core/io/hf_tensor_names.h"

#include <string_view>

#include "core/model/model_config.h"

namespace remat {

namespace {

constexpr std::string_view kLlama4Text = "language_model.";

}  // namespace

HfTensorNames::HfTensorNames(Family family, bool tied)
    : gpt2_(family == Family::Gpt2), llama4_(family == Family::Llama4), tied_(tied) {}

std::string HfTensorNames::layout_name(const std::string& n) const {
  if (gpt2_ && !n.starts_with("transformer.") && n != "lm_head.weight") return "transformer." + n;
  if (llama4_ && n.starts_with(kLlama4Text)) return n.substr(kLlama4Text.size());
  return n;
}

bool HfTensorNames::skipped(const std::string& n) const {
  if (llama4_ && (n.starts_with("vision_model.") || n.starts_with("multi_modal_projector."))) return true;
  const std::string name = layout_name(n);
  return (gpt2_ && (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"))) ||
         (tied_ && name == "lm_head.weight");
}

}  // namespace remat
