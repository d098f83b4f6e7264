// The ops of a training step, implemented once per device. The executor calls these; the CPU
// backend is the reference, the CUDA backend runs the same ops on a GPU, and the null backend
// (the simulator) runs none of them.
//
// Conventions shared by every backend:
// - Activations, parameters and parameter gradients have the model's dtype (bf16 or fp32);
//   arithmetic is fp32, results are rounded once when stored. Masks are u8 (1 = kept),
//   log-sum-exp and per-row losses are fp32, tokens and targets are i32.
// - Linear weights are [out, in] row-major: y[M,N] = x[M,K] * W[N,K]^T + b[N].
// - The fused projection qkv is [B, S, (heads + 2*kv_heads) * d]: all q heads, then k, then v.
//   Attention probabilities are [B, heads, S, S]; the context is [B, S, heads * d].
// - Every backward op *accumulates* into parameter gradients. For an activation gradient the
//   flag `acc` says whether to add (true) or overwrite (false). Ops marked "always accumulates"
//   write only part of their gradient and always add; the executor zeroes such buffers first.
// - Compute ops take device tensors only; fill_zero, copy, read, read_bytes and write_bytes
//   take either space.
// - Attention is causal: the upper triangle of P (j > i) is written as 0 and never read.
// - Dropout bits come from philox_bits(key, index) with index the element's position in the
//   tensor the mask covers; kept elements are scaled by 1/(1-p).
#pragma once
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core/backend/tensor.h"
#include "core/graph/op_table.h"
#include "core/memory/memory_resource.h"
#include "core/model/model_config.h"
#include "core/util/error.h"
#include "core/util/philox.h"

namespace remat {

struct AdamSegment {
  std::int64_t offset = 0, numel = 0;
  bool decay = false;
};

struct AdamArgs {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
  int t = 1;  // 1-based step count for bias correction
  // m and v hold zeros (a model's first step): they are written without being read, with the
  // same arithmetic on zeros, so the results are those of zero-filled moments, bit for bit.
  bool zero_moments = false;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda", "null"
  // False for the simulator: no op does anything and memory is virtual.
  virtual bool computes() const { return true; }
  virtual MemoryResource& memory(Space s) = 0;
  // Scratch the backend needs for this model (GEMM staging, flash tiles, logits chunks).
  // A pure function of the config and the backend's own settings (its thread count on the
  // CPU), so the simulator can ask it without running anything.
  virtual std::uint64_t workspace_bytes(const ModelConfig& m) const = 0;
  virtual void set_workspace(const Tensor& ws) = 0;
  // Wait for all queued work (no-op on the CPU).
  virtual void synchronize() {}
  // True when ops are queued and run later (CUDA): host times are not op times.
  virtual bool asynchronous() const { return false; }
  // Make later compute wait for every copy to the device issued so far (offload and prefetch
  // run on copy streams on CUDA, so they overlap compute until the executor joins them; copies
  // to the host produce nothing compute reads).
  virtual void join_copies() {}
  // Device bytes a run may use now (free host memory on the CPU, free GPU memory on CUDA);
  // 0 when unknown.
  virtual std::uint64_t available_memory() const { return 0; }
  // True when the host may read and write device tensors' data directly (the CPU backend).
  virtual bool host_addressable() const { return false; }
  // Host threads for large host-side jobs of the run (start-up): the CPU backend's own thread
  // count, so they never compete with its ops; elsewhere the machine's cores.
  virtual int host_threads() const {
    const unsigned n = std::thread::hardware_concurrency();
    return n > 0 ? static_cast<int>(n) : 1;
  }
  // Human-readable facts for provenance (BLAS, threads, CPU or GPU model, driver).
  virtual std::vector<std::pair<std::string, std::string>> describe() const { return {}; }

  // --- memory ---
  virtual void fill_zero(const Tensor& t) = 0;
  // dst and src may be in different spaces (offload and prefetch); sizes equal.
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;
  virtual void add_into(const Tensor& dst, const Tensor& src) = 0;  // dst += src
  // Reads a tensor into host floats (any dtype, any space): checksums, tests, losses.
  virtual void read(const Tensor& src, std::vector<float>& out) = 0;
  virtual void read_bytes(const Tensor& src, void* out) = 0;
  virtual void write_bytes(const Tensor& dst, const void* in) = 0;

  // --- embedding: out[B*S, H] = wte[token] * scale (+ wpe[position]), the product in fp32;
  // backward dwte[v] += scale * (sum of the dout rows of token v). scale is 1 but for the
  // models that scale their embeddings (Gemma: sqrt(hidden) in the model's dtype) ---
  virtual void embedding_fwd(const Tensor& tokens, const Tensor& wte, const Tensor* wpe,
                             const Tensor& out, int B, int S, int H, float scale) = 0;
  virtual void embedding_bwd(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                             const Tensor* dwpe, int B, int S, int H, float scale) = 0;
  // --- dropout outside the blocks (the embedding's): mask then apply, as DropoutMask and
  // AttnDropout do ---
  virtual void dropout_mask(const Tensor& mask, const DropoutKey& key, float p,
                            std::int64_t n) = 0;
  virtual void dropout_fwd(const Tensor& x, const Tensor& mask, const Tensor& y, float p,
                           std::int64_t n) = 0;
  virtual void dropout_bwd(const Tensor& dy, const Tensor& mask, const Tensor& dx, float p,
                           std::int64_t n, bool acc) = 0;
  // --- the final norm (LayerNorm or RMSNorm, as the blocks' norms) ---
  virtual void layernorm_fwd(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                             std::int64_t rows, int H, float eps) = 0;
  virtual void layernorm_bwd(const Tensor& x, const Tensor& w, const Tensor& dy,
                             const Tensor& dx, const Tensor& dw, const Tensor& db,
                             std::int64_t rows, int H, float eps, bool acc) = 0;
  // RMSNorm's weight is applied as (w_offset + w) in fp32 (Gemma: 1; everyone else 0).
  virtual void rmsnorm_fwd(const Tensor& x, const Tensor& w, const Tensor& y, std::int64_t rows,
                           int H, float eps, float w_offset) = 0;
  virtual void rmsnorm_bwd(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& dx,
                           const Tensor& dw, std::int64_t rows, int H, float eps, bool acc,
                           float w_offset) = 0;
  // --- QK-norm with its heads split over tensor-parallel ranks: the rows of in[0] hold this
  // rank's K of the q projection's q_width columns and N of the k projection's k_width (the
  // arguments of the QkNorm op otherwise). The RMS statistic of each row spans all ranks, so the
  // op runs in two parts around a sum over the ranks:
  // - qk_norm_sums: this rank's per-row partial sums into sums[M, 2] (forward: x·x over the q
  //   part, then the k part) or sums[M, 4] (backward: those two, then dy·w·x over each part);
  // - qk_norm_split, with sums holding the totals over the ranks: the forward's out[0] or the
  //   backward's din[0] (acc[0]: added into), dw and db accumulated, rows normalized by
  //   sqrt(sum / width + eps) of the whole widths.
  // The CPU and CUDA backends implement these (the simulator's does nothing); elsewhere an Error.
  virtual void qk_norm_sums(Pass, const OpArgs&, const Tensor&) { no_split_qk_norm(); }
  virtual void qk_norm_split(Pass, const OpArgs&, const Tensor&, int /*q_width*/, int /*k_width*/) {
    no_split_qk_norm();
  }

  // --- the block ops of the op table (core/graph/ops.def): one entry point, dispatched by each
  // backend to its bodies of that op. The arguments' meaning per op:
  // - LayerNorm / RmsNorm: in[0] x [M, K] -> out[0] y; w, b (LayerNorm); weight (w_offset + w);
  //   statistics are recomputed from x in backward.
  // - QkNorm: in[0] qkv rows [M, K + 2N] -> out[0]: RMSNorm of the q part (K wide) with w, of
  //   the k part (N wide) with b, v copied; backward dw and db (the k weight's) accumulate.
  // - QkHeadNorm: as QkNorm over each attn.d-wide head of the q part (w) and of the k part (b),
  //   both weights d wide, applied as (w_offset + w); without w and b (both null: Llama 4's L2
  //   norm) the weight is 1 and there are no weight gradients.
  // - Linear: y = x W^T + b (b may be absent), M rows, K in, N out; backward dx = dy W (acc:
  //   +=), dW += dy^T x, db += colsum(dy).
  // - Rope: Hugging Face rotate_half on the first rope.rotary_dim dims of every q and k head
  //   of in[0] (qkv), the rest copied; cos and sin scaled by rope.attention_scaling; with
  //   rope.interleaved the pairs are adjacent dims (2i, 2i + 1) (Llama 4's complex form).
  // - MlaPack (multi-head latent attention, DeepSeek-V2/V3): in[0] q [M, heads·d] (per head
  //   d - r unrotated dims, then r = rope.rotary_dim rotated), in[1] kv [M, heads·(d - r + dv)]
  //   (per head the k part, then the value, dv = attn.v_dim()), in[2] k_pe [M, r] (one rotated key
  //   part every head shares) -> out[0] the packed q|k|v [M, attn.qkv_width()] (kv_heads = heads).
  //   The rotation pairs adjacent dims (2i, 2i + 1) and writes them apart (i, i + r/2), as Hugging
  //   Face's apply_rotary_pos_emb_interleave; cos and sin scaled by rope.attention_scaling.
  //   Backward: dq, dkv (acc[0], acc[1]) and dk_pe, the heads' sum (acc[2]).
  // - AttnSoftmax: probs = softmax(mask(softcap(Q K^T * scale))), written in full (masked
  //   entries 0); backward always accumulates dQ and dK into the q and k parts of din[0].
  //   Attention sinks (gpt-oss; w [heads] given, else none): sink h is one more column of every
  //   row of head h, never capped or masked, with no value (the row's probabilities sum to less
  //   than 1); backward dw[h] += -sum over (b, i) of p_sink * sum_j P dP, in a fixed order.
  // - AttnDropout: y = x * mask / (1 - p) (in[0] x, in[1] mask).
  // - AttnPV: ctx = P V (in[0] P [B, heads, S, S], in[1] qkv; ctx heads attn.v_dim() wide); backward dP = dctx V^T (acc[0]),
  //   always accumulates dV into din[1].
  // - FlashAttn: tiled, online softmax, out[0] ctx and out[1] lse [B, heads, S] fp32; attention
  //   dropout (p > 0) uses the naive path's mask bits, index ((b * heads + head) * S + i) * S + j;
  //   backward always accumulates into din[0]. Sinks (w, dw) as AttnSoftmax's: lse includes the
  //   sink; dw[h] += -sum over (b, i) of exp(sink_h - lse) * rowsum(dO * O).
  // - Residual: out = in[0] + in[1] * in[2] / (1 - p) * branch_mult (in[2], the mask, absent
  //   when p == 0); backward din[0] = dout (acc[0]), din[1] = dout * mask / (1 - p) * branch_mult
  //   (acc[1]).
  // - Gelu (tanh form) and GeluErf (exact, x * Phi(x)) over M elements.
  // - SwiGlu: in[0] [M, 2K] (gate | up) -> [M, K] silu(gate) * up; GeGlu: gelu_tanh(gate) * up;
  //   SwiGluClamped: (u + 1) * g * sigmoid(1.702 g), g = min(gate, limit), u = clamp(up, ±limit),
  //   a clamped value passing no gradient (a NaN passes through, as torch.clamp's).
  // - DropoutMask: out[0][i] = philox_bits(key, i) >= dropout_threshold(p) (1 = kept), M elements.
  // - The mixture of experts (moe: its sizes; the routing table's layout: cpu/cpu_moe.cpp):
  //   MoeRoute: in[0] logits [tokens, experts] -> out[0] the top-k weights, out[1] the routing
  //   table (i32); backward dlogits from dweights. Under the load-balancing loss (aux given;
  //   softmax routers): forward also writes aux [2E], the layer's choices per expert and the sum
  //   of each expert's probability over its tokens; backward adds, for every expert e, the
  //   gradient of the probabilities times aux [E] (the loss's gradient per probability). MoePermute: in[0] x [tokens, K], in[1] routing
  //   -> out[0] the rows [moe.rows(), K] (padding rows 0); backward dx (acc) sums its rows. Under
  //   moe.weight_input (Llama 4), in[2] the weights: each row is x · w, backward dx sums w · d row
  //   and dweights (in[2]'s gradient) = d row · x.
  //   ExpertLinear: in[0] rows [M, K], in[1] routing, w [experts · N, K] -> out[0] [M, N], expert
  //   e's rows through its N x K slice (with a capacity its whole block), plus its N-wide slice
  //   of b [experts · N] when given; backward as Linear's (db += each expert's row sums).
  //   MoeUnpermute: in[0] rows [moe.rows(), K], in[1] weights, in[2] routing, in[3] (optional)
  //   the shared experts' output [tokens, K] -> out[0] each token's weighted sum of its rows plus
  //   in[3]; backward d rows (padding 0), dweights, d shared = dout. Under moe.weight_input the
  //   sum is unweighted and dweights 0 (MoePermute's backward gives them).
  // - SigmoidGate: in[0] x [M, K], in[1] g [M] -> out[0] = sigmoid(g) * x; backward dx, dg.
  virtual void run(OpKind op, Pass pass, const OpArgs& args) = 0;

  // --- the load-balancing loss of a micro-batch (backend/moe_aux.h): from the statistics every
  // MoE layer's MoeRoute wrote into `aux` (its layout: MoeAuxLayout), the loss and its gradient
  // per probability, written into the same buffer; `tokens` per layer, `grad_scale` the share of
  // the summed gradient (as the cross-entropy's). Deterministic; the simulator's does nothing.
  virtual void moe_aux_loss(const Tensor& aux, int layers, int experts, std::int64_t tokens, double coef,
                            double grad_scale) = 0;

  // --- head and loss, fused: for rows of x, logits = x W^T (W: [V, H]) in chunks that never
  // exist whole; losses[r] = logsumexp - logit[target] (fp32); with dlogits = (softmax -
  // onehot) * scale: dx = dlogits W (overwritten), dW += dlogits^T x. softcap > 0 (Gemma 2's
  // final_logit_softcapping): the logits are softcap * tanh(logits / softcap) before the loss,
  // and dlogits is taken through the cap. logit_mult (Granite's 1 / logits_scaling) multiplies
  // the logits first, and dlogits is taken through it.
  virtual void head_loss(const Tensor& x, const Tensor& W, const Tensor& targets,
                         const Tensor& losses, const Tensor& dx, const Tensor& dW,
                         std::int64_t rows, int H, int V, float scale, float softcap,
                         float logit_mult) = 0;

  // --- AdamW over segments of the flat parameter buffer. master is empty for fp32 models
  // (the parameters are the master weights). ---
  virtual void adamw(const Tensor& params, const Tensor& grads, const Tensor* master,
                     const Tensor& m, const Tensor& v, const std::vector<AdamSegment>& segs,
                     const AdamArgs& args) = 0;
  // fp32 master -> params in the model's dtype (after loading or initializing).
  virtual void cast(const Tensor& dst, const Tensor& src) = 0;

 private:
  [[noreturn]] void no_split_qk_norm() const {
    throw Error("the " + name() + " backend does not run QK-norm split over tensor-parallel ranks");
  }
};

}  // namespace remat
