// One transformer block as a table of named steps and the tensors they make. This table is the
// single source for the executor (what to run and allocate), the simulator (the same walk with
// no arithmetic), the selective policy (tensor names), the analytic formulas and the ledger.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model/model_config.h"
#include "core/graph/op_table.h"
#include "core/model/param_layout.h"
#include "core/util/philox.h"

namespace remat {

struct TensorDef {
  std::string name;      // stable: "attn.qkv", "attn.probs", "mlp.gelu_in", ...
  DType dtype = DType::F32;
  std::int64_t numel = 0;
  std::uint64_t bytes = 0;
  std::string formula;   // bytes in symbols, e.g. "2·s·b·h" (16-bit) for views and docs
  bool saved = false;    // read by some backward step: kept under store-everything
  int producer = -1;     // step index; -1 for the block input
  std::vector<int> consumers;  // step indices
};

struct StepDef {
  std::string name;      // "ln1", "qkv", "attn.softmax", ...
  OpKind op = OpKind::Linear;
  StepKind kind = StepKind::Gemm;
  std::vector<int> in, out;  // tensor indices
  std::vector<int> needs;    // tensors its backward reads (they are the saved set)
  std::string w, b;          // its parameters by their names in the block (ParamSpec::local), or ""
  std::int64_t M = 0;        // rows for linear / norms / elementwise
  int K = 0, N = 0;          // linear: in and out features; norms: width
  float w_offset = 0.0f;     // norms: weight applied as (w_offset + w)
  std::string module;        // the recompute module it belongs to (kRecomputeModules), or ""
  DropoutSite site = kSiteEmbedding;  // for dropout-bearing steps
  // Attention: rows = B·heads, S, d in K, and sq = 2·(visible query-key pairs) − S of a block
  // with the model's window (sq_full: of a block without one; both S² when there is none).
  std::uint64_t rows = 0, sq = 0, sq_full = 0;
  std::uint64_t flops_fwd = 0, flops_bwd = 0;            // blocks with the window (or all)
  std::uint64_t flops_fwd_full = 0, flops_bwd_full = 0;  // blocks without it
  bool has_param(const std::string& local) const { return !local.empty() && (w == local || b == local); }
  std::uint64_t fwd_flops(bool windowed) const { return windowed ? flops_fwd : flops_fwd_full; }
  std::uint64_t bwd_flops(bool windowed) const { return windowed ? flops_bwd : flops_bwd_full; }

  // Terms of the FLOP formulas in ops.def.
  std::uint64_t m() const { return static_cast<std::uint64_t>(M); }
  std::uint64_t mk() const { return m() * static_cast<std::uint64_t>(K); }
  std::uint64_t mkn() const { return mk() * static_cast<std::uint64_t>(N); }
  std::uint64_t bias_mn() const { return !b.empty() ? m() * static_cast<std::uint64_t>(N) : 0; }
  std::uint64_t attn_sq() const { return rows * sq; }
  std::uint64_t attn_mm() const { return 2 * rows * sq * static_cast<std::uint64_t>(K); }
};

StepDef mask_step(const std::string& name, int mask, DropoutSite site, std::int64_t n);

// The MoE ops' sizes for a model's micro-batch (all zero without experts).
MoeDims moe_dims(const ModelConfig& m);

// Megatron-LM's names for the modules it recomputes selectively (`--recompute-modules`), all of
// them, whether a block has the module or not: `core_attn` (the attention core: scores,
// softmax, dropout, P·V, or flash attention), `mlp` (the dense MLP: its projections and
// activation), `layernorm` (the norms before attention and MLP), `moe_act`, `moe`,
// `shared_experts` (a mixture of experts' activation, the whole layer, its shared experts) and
// `mla_up_proj` (multi-head latent attention's up-projections).
inline constexpr const char* kRecomputeModules[] = {"core_attn", "mlp",          "layernorm",  "moe_act",
                                                    "moe",       "shared_experts", "mla_up_proj"};

// What recomputing one module drops from a block's saved set. `layernorm`, `moe_act` and
// `mla_up_proj` (latent attention's up projections and rotation, from the latents to the packed
// q|k|v) drop their outputs (rebuilt from their inputs before their consumers' backward); a module recomputed as a
// checkpoint (the others) drops the saved tensors made inside it that only its own steps'
// backward reads, and keeps its input and output.
struct RecomputeModule {
  std::string name;
  std::vector<std::string> tensors;  // saved tensors, in table order; never empty
};

class BlockGraph {
 public:
  explicit BlockGraph(const ModelConfig& m);

  const ModelConfig& config() const { return cfg_; }
  const std::vector<TensorDef>& tensors() const { return tensors_; }
  const std::vector<StepDef>& steps() const { return steps_; }
  int input() const { return input_; }    // "block.in"
  int output() const { return output_; }  // "block.out" (the next block's input)
  std::optional<int> find(const std::string& tensor) const;

  // Bytes of the saved set (store-everything), per block.
  std::uint64_t saved_bytes() const;
  // Saved bytes when the named tensors are dropped and recomputed.
  std::uint64_t saved_bytes_without(const std::vector<std::string>& recompute) const;
  // FLOPs of block `block`, by its own table (blocks of one table differ only where some have a
  // sliding window and some not).
  std::uint64_t flops_forward(int block = 0) const;
  std::uint64_t flops_backward(int block = 0) const;
  // Forward FLOPs of the steps needed to rebuild `targets` from `live` (indices) in `block`, or
  // nullopt if impossible. Also returns the step list through `steps` when given.
  std::optional<std::uint64_t> recompute_flops(const std::vector<bool>& live,
                                               const std::vector<bool>& targets,
                                               std::vector<int>* steps = nullptr,
                                               int block = 0) const;
  // Whether block `block` of this table's blocks attends through a window (the model's block
  // first_block() + block: a pipeline stage's table numbers its own blocks from 0).
  // A chunked block (ModelConfig::chunk_of) counts as windowed: its band is the model's one.
  bool windowed(int block) const {
    return cfg_.window_of(first_block_ + block) > 0 || cfg_.chunk_of(first_block_ + block) > 0;
  }
  int first_block() const { return first_block_; }
  void set_first_block(int b);
  // A model whose layer kinds differ in their steps (layers without RoPE among layers with it,
  // dense MLPs among mixtures of experts) has one table per structure: this one (RoPE as the
  // model's feature, the MLP of the pattern's first kind) and its variants. The
  // table of block `block` (numbered as windowed() numbers them) and its index among them (0:
  // this one, k: variant k - 1). A variant has no variants of its own.
  const BlockGraph& of(int block) const;
  int table_index(int block) const;
  int table_count() const { return 1 + static_cast<int>(variants_.size()); }
  const BlockGraph& table(int i) const { return i == 0 ? *this : variants_[static_cast<std::size_t>(i - 1)]; }
  bool uniform() const { return variants_.empty(); }
  // Whether this table's MLP is the mixture of experts.
  bool moe() const { return moe_; }
  // Per tensor, the lowest step index whose backward reads it (the last reader in the backward's
  // order, after which the backward frees it); -1 for a tensor no backward reads.
  const std::vector<int>& last_need() const { return last_need_; }
  // Names of the tensors in the saved set, in table order.
  std::vector<std::string> saved_names() const;
  // Default selective set: the attention core with naive attention, else the pre-norm outputs
  // and the activation-function output.
  std::vector<std::string> default_selective() const;
  // The recompute modules this block has (those that would drop something), in
  // kRecomputeModules' order.
  std::vector<RecomputeModule> recompute_modules() const;
  // The saved tensors recomputing `modules` drops (table order). Throws Error for a name the
  // block does not have, listing those it has.
  std::vector<std::string> module_tensors(const std::vector<std::string>& modules) const;

 private:
  int add_tensor(const std::string& name, DType dt, std::int64_t numel, std::string formula);
  int add_step(StepDef s);
  void finish();
  void build();
  std::string width_formula(std::int64_t width) const;
  int build_attention(int qkv);
  int build_mlp(int in);
  int build_moe(int in);
  int build_shared_experts(int in);
  int build_latent_qkv(int x);  // multi-head latent attention's packed q|k|v from the block's normed input
  std::string moe_formula(std::int64_t numel_per_row, bool permuted) const;
  // A norm step whose weight (and LayerNorm's bias) are name.w (name.b), over `width` (0: hidden).
  int norm_step(const std::string& name, const std::string& out, int in, const char* module = "", int width = 0);
  int residual_step(const std::string& name, int res, int x, const std::string& out, DropoutSite site);

  ModelConfig cfg_;
  std::vector<TensorDef> tensors_;
  std::vector<StepDef> steps_;
  int input_ = -1, output_ = -1;
  int first_block_ = 0;
  std::vector<int> last_need_;
  bool rope_ = false, moe_ = false;
  std::vector<BlockGraph> variants_;

  BlockGraph(const ModelConfig& m, bool rope, bool moe);

 public:
  // A table given tensor by tensor and step by step instead of built from the model (for tests
  // of what walks tables). Of each tensor only name, dtype, numel and formula are read; bytes,
  // producers, consumers and the saved set are derived as for a model's table. Throws Error
  // for an index out of range.
  // `primary` with `variants` as its other tables (a rank's share of each table of `like`, a
  // model's tables, whose structures they take).
  static BlockGraph with_variants(BlockGraph primary, std::vector<BlockGraph> variants, const BlockGraph& like);
  static BlockGraph from_table(const ModelConfig& m, std::vector<TensorDef> tensors,
                               std::vector<StepDef> steps, int input, int output);
};

// Sizes of the tensors outside the blocks, so nothing is allocated that the model of memory
// does not know.
struct OuterSizes {
  std::int64_t tokens = 0;        // i32 tokens and targets, each B*S
  std::int64_t embed_out = 0;     // act, B*S*H (block 0's input)
  std::int64_t embed_mask = 0;    // u8, B*S*H when the embedding has dropout, else 0
  std::int64_t final_in = 0;      // act, B*S*H (the last block's output)
  std::int64_t lnf_out = 0;       // act, B*S*H
  std::int64_t losses = 0;        // fp32, B*S
  explicit OuterSizes(const ModelConfig& m);
};

}  // namespace remat
