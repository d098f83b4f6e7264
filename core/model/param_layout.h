// Where every parameter lives in the one contiguous parameter buffer, with its Hugging Face
// name. Gradients, master weights and AdamW moments use the same offsets in their buffers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/model_config.h"

namespace remat {

struct ParamSpec {
  std::string name;      // ours, e.g. "h.3.attn.qkv.w"
  std::string local;     // a block parameter's name in its block ("attn.qkv.w"), which its
                         // block's steps use (StepDef::w, b); empty outside the blocks
  std::string hf_name;   // Hugging Face tensor name (first part when fused, see hf_parts)
  std::int64_t rows = 0;     // our layout: row-major [rows, cols]; linear weights are [out, in]
  std::int64_t cols = 1;     // 1 for vectors
  std::int64_t offset = 0;   // in elements, into the parameter buffer
  int block = -1;            // -1 outside the blocks
  bool decay = false;        // AdamW weight decay applies (matrices, not norms or biases)
  bool hf_transposed = false;  // stored [in, out] by Hugging Face (GPT-2 Conv1D)
  // The value a vector starts at: a norm's weight its identity (1; 0 where the norm scales by
  // 1 + w, as Gemma's does and Hugging Face starts it), a bias 0. Matrices start random.
  float fill = 0.0f;
  // A fused tensor (q|k|v and gate|up) is several Hugging Face tensors stacked by rows, except
  // where the family stores it fused (GPT-2's c_attn, Phi-3's qkv_proj and gate_up_proj).
  std::vector<std::pair<std::string, std::int64_t>> hf_parts;  // (name, rows); empty if one
  // > 0: the Hugging Face tensor has this many rows, this parameter's and those of the ones right
  // after it in the layout, which have no hf_name of their own (DeepSeek's kv_a_proj_with_mqa: the
  // latent's rows, then the rotated key part's).
  std::int64_t hf_rows = 0;
  // q|k|v rows (weight or bias) that Hugging Face stores by kv group: group g's `rep` q heads,
  // then its k head, then its v head, each `d` rows (GPT-NeoX: rep 1, per head [q, k, v]).
  // groups 0: stored in our order.
  struct QkvGroups {
    std::int64_t groups = 0, rep = 0, d = 0;
  } hf_qkv;
  // Every expert's part as one Hugging Face tensor (gpt-oss's experts.gate_up_proj,
  // experts.down_proj and their biases): a weight [experts, cols, rows / experts] (each expert's
  // [in, out]), a bias [experts, rows / experts]. `interleaved`: an expert's gate|up rows are its
  // columns 0, 2, 4, ... (gate) and 1, 3, 5, ... (up). experts 0: not stacked.
  struct ExpertStack {
    std::int64_t experts = 0;
    bool interleaved = false;
  } hf_stack;
  std::int64_t numel() const { return rows * cols; }
};

// The shape of a stacked parameter's Hugging Face tensor (hf_stack), and its values between our
// layout and that tensor.
std::vector<std::int64_t> stacked_hf_shape(const ParamSpec& p);
void stacked_to_hf(const ParamSpec& p, const float* ours, float* hf);
void stacked_from_hf(const ParamSpec& p, const float* hf, float* ours);

// Rows of a q|k|v parameter between our order and Hugging Face's grouped order (hf_qkv).
void qkv_rows_to_hf(const ParamSpec& p, const float* ours, float* hf);
void qkv_rows_from_hf(const ParamSpec& p, const float* hf, float* ours);

// The parameters outside the blocks a layout holds: all of them for a whole model; a pipeline
// stage's are the embedding (word embedding, learned positions) on the first stage and the head
// (final norm, output layer or, tied, its own copy of the word embedding) on the last.
struct LayoutParts {
  bool embedding = true, head = true;
  int first_block = 0;  // the model's block the layout's block 0 is (a pipeline stage's first): its kind
};

class ParamLayout {
 public:
  explicit ParamLayout(const ModelConfig& m, LayoutParts parts = {});

  const std::vector<ParamSpec>& params() const { return params_; }
  std::int64_t total() const { return total_; }
  // Offset of block parameter `local` (ParamSpec::local), or -1 if the block has none of that name.
  std::int64_t offset(int block, const std::string& local) const;
  std::int64_t numel(int block, const std::string& local) const;
  // A block's parameters, as indices into params(), in layout order.
  const std::vector<std::size_t>& block_params(int block) const { return blocks_[static_cast<std::size_t>(block)]; }
  const ParamSpec* find(const std::string& name) const;

  const LayoutParts& parts() const { return parts_; }
  // Outside the blocks (-1 where the layout's parts lack them).
  std::int64_t wte = -1, wpe = -1, lnf_w = -1, lnf_b = -1, lm_head = -1;
  // The head's weight: wte when tied, lm_head otherwise.
  std::int64_t head_weight() const { return lm_head >= 0 ? lm_head : wte; }

 private:
  std::int64_t add(ParamSpec p);
  const ParamSpec* in_block(int block, const std::string& local) const;
  std::vector<ParamSpec> params_;
  std::vector<std::vector<std::size_t>> blocks_;  // per block, its parameters' indices
  std::int64_t total_ = 0;
  LayoutParts parts_;
};

}  // namespace remat
