// The table of block ops (ops.def): each op's name, coarse kind, what its backward reads, which
// input gradients it accumulates into, and its FLOPs. The block graph, the executor's dispatch,
// the backends' interface and the null backend all come from it.
#pragma once
#include <cstdint>

#include "core/backend/tensor.h"
#include "core/util/philox.h"

namespace remat {

enum class OpKind : std::uint8_t {
#define OP(id, ...) id,
#include "core/graph/ops.def"
#undef OP
};
constexpr int kOpCount = 0
#define OP(id, ...) +1
#include "core/graph/ops.def"
#undef OP
    ;

// The coarse kind shown in views: GEMM, norm, softmax, dropout, activation, attention, elementwise.
enum class StepKind : std::uint8_t { Gemm, Norm, Softmax, Dropout, Activation, Attention, Elementwise };
const char* to_string(OpKind k);
const char* to_string(StepKind k);

struct StepDef;
struct OpTraits {
  const char* name;
  StepKind kind;
  std::uint32_t reads_in, reads_out, always_acc;  // bit k: input / output k
  std::uint64_t (*flops_fwd)(const StepDef&);
  std::uint64_t (*flops_bwd)(const StepDef&);
};
const OpTraits& op_traits(OpKind k);

// Attention shapes of one block (they may differ between blocks: windows, scales).
struct AttnDims {
  int B = 0, S = 0, heads = 0, kv_heads = 0, d = 0;
  int dv = 0;            // the value heads' width (multi-head latent attention); 0: d
  float scale = 0.0f;    // scores = q·k * scale
  int window = 0;        // > 0: query i sees keys i - window < j <= i
  int chunk = 0;         // > 0: query i sees keys j <= i of its own chunk, j / chunk == i / chunk
  float softcap = 0.0f;  // > 0: scores = softcap * tanh(scores / softcap), before the mask
  int group() const { return heads / kv_heads; }
  int v_dim() const { return dv > 0 ? dv : d; }
  // The packed q|k|v row (q and k heads d wide, v heads v_dim) and the context's row.
  std::int64_t qkv_width() const {
    return static_cast<std::int64_t>(heads + kv_heads) * d + static_cast<std::int64_t>(kv_heads) * v_dim();
  }
  std::int64_t ctx_width() const { return static_cast<std::int64_t>(heads) * v_dim(); }
  // First key query i sees.
  int first_key(int i) const {
    if (chunk > 0) return i / chunk * chunk;
    return window > 0 && i >= window ? i - window + 1 : 0;
  }
  // The band as one int, as the CUDA kernels take it (kernels/detail/attn_band.h): the window,
  // minus the chunk, or 0.
  int band() const { return window > 0 ? window : chunk > 0 ? -chunk : 0; }
};

// RoPE rotation of one model: inverse frequencies of the rotated pairs and the factor cos and
// sin are scaled by (1 outside YaRN and LongRoPE). rotary_dim = 2 * inv_freq count <= d.
struct RopeTable {
  const float* inv_freq = nullptr;
  int rotary_dim = 0;
  float attention_scaling = 1.0f;
  // Pairs of adjacent dims (2i, 2i + 1), the complex form of Llama 4 (and Meta's checkpoints),
  // instead of Hugging Face's rotate_half pairs (i, i + rotary_dim/2); the angles are the same.
  bool interleaved = false;
  // Llama 4's attention temperature tuning, on its layers without RoPE (rotary_dim 0 there): the
  // q heads of position s times log(floor((s + 1) / temp_floor) + 1) · temp_scale + 1, the k and
  // v heads copied. temp_floor 0: none.
  int temp_floor = 0;
  float temp_scale = 0.0f;
};

// A mixture of experts' sizes (model_config.h MoeConfig): the MoE ops' arguments.
struct MoeDims {
  int experts = 0, top_k = 0;
  std::int64_t tokens = 0, capacity = 0;  // capacity 0: dropless
  bool norm_topk = false;
  bool sigmoid = false;              // the router (backend/moe_score.h)
  int groups = 0, topk_groups = 0;
  bool group_max = false;            // a group's score: its best choice score (else its two best summed)
  float scaling = 1.0f;
  bool weight_input = false;         // the weights scale the permuted rows, not the experts' outputs
  std::int64_t rows() const { return capacity > 0 ? capacity * experts : tokens * top_k; }
};

enum class Pass : std::uint8_t { Forward, Backward };

// The arguments of one op call. Pointers are null where the op or the step has none.
struct OpArgs {
  static constexpr int kMaxIn = 4, kMaxOut = 2;
  const Tensor* in[kMaxIn] = {};     // forward inputs, in the step's order
  const Tensor* out[kMaxOut] = {};   // forward outputs
  const Tensor* din[kMaxIn] = {};    // backward: gradients of the inputs (written)
  const Tensor* dout[kMaxOut] = {};  // backward: gradients of the outputs (read)
  bool acc[kMaxIn] = {};             // backward: add into din[k] instead of overwriting
  const Tensor *w = nullptr, *b = nullptr, *dw = nullptr, *db = nullptr;  // parameters
  std::int64_t M = 0;
  int K = 0, N = 0;
  float eps = 0.0f;         // norms
  float w_offset = 0.0f;    // norms: the weight is applied as (w_offset + w)
  float p = 0.0f;           // dropout probability at this step's site (0: none)
  float branch_mult = 1.0f; // Residual: the branch's multiplier (Granite's residual_multiplier)
  float limit = 0.0f;       // SwiGluClamped: the gate clamped to at most limit, up to [-limit, limit]
  // MoeRoute under the load-balancing loss (backend/moe_aux.h): forward writes the layer's
  // statistics [2 · experts] here, backward reads the loss's gradient per expert [experts]. Null: none.
  const Tensor* aux = nullptr;
  DropoutKey key;           // this step's dropout site in this block and step
  AttnDims attn;
  RopeTable rope;
  MoeDims moe;
};

}  // namespace remat
