#include "core/io/hf_tensor_names.h"

#include "core/model/model_config.h"

namespace remat {

namespace {

bool starts(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

bool ends(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

constexpr const char* kLlama4Text = "language_model.";

}  // namespace

HfTensorNames::HfTensorNames(Family family, bool tied)
    : gpt2_(family == Family::Gpt2), llama4_(family == Family::Llama4), tied_(tied) {}

std::string HfTensorNames::layout_name(const std::string& n) const {
  if (gpt2_ && !starts(n, "transformer.") && n != "lm_head.weight") return "transformer." + n;
  if (llama4_ && starts(n, kLlama4Text)) return n.substr(std::string(kLlama4Text).size());
  return n;
}

bool HfTensorNames::skipped(const std::string& n) const {
  if (llama4_ && (starts(n, "vision_model.") || starts(n, "multi_modal_projector."))) return true;
  const std::string name = layout_name(n);
  return (gpt2_ && (ends(name, ".attn.bias") || ends(name, ".attn.masked_bias"))) ||
         (tied_ && name == "lm_head.weight");
}

}  // namespace remat
