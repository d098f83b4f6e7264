// Which tensors of a Hugging Face checkpoint a model takes, and under which of its layout's
// names (ParamSpec::hf_name):
//  - GPT-2's files name the blocks with "transformer." (GPT2LMHeadModel) or without it (the bare
//    GPT2Model); both read as the layout's "transformer." names.
//  - Llama 4's published checkpoints (Llama4ForConditionalGeneration) hold the text model under
//    "language_model." ("language_model.model.layers.0...", "language_model.lm_head.weight")
//    beside the vision tower ("vision_model.") and its projector ("multi_modal_projector.");
//    the text model's tensors read without the prefix, as Llama4ForCausalLM saves them.
// Skipped, neither read nor refused: GPT-2's causal-mask buffers, a tied head's copy of the
// embedding (Hugging Face ties them on load), and Llama 4's vision tower and projector (a text
// step has no image tokens).
#pragma once
#include <cstdint>
#include <string>

namespace remat {

enum class Family : std::uint8_t;

class HfTensorNames {
 public:
  HfTensorNames(Family family, bool tied);
  // The layout's name of a file's tensor.
  std::string layout_name(const std::string& file_name) const;
  // Whether a file's tensor is no parameter of the step (above).
  bool skipped(const std::string& file_name) const;

 private:
  bool gpt2_, llama4_, tied_;
};

}  // namespace remat
