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
#include <vector>

#include "core/backend/tensor.h"
#include "core/memory/memory_resource.h"
#include "core/model/model_config.h"
#include "core/util/philox.h"

namespace remat {

struct AttnDims {
  int B = 0, S = 0, heads = 0, kv_heads = 0, d = 0;
  float scale = 0.0f;  // 1/sqrt(d)
  int group() const { return heads / kv_heads; }
};

struct AdamSegment {
  std::int64_t offset = 0, numel = 0;
  bool decay = false;
};

struct AdamArgs {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
  int t = 1;  // 1-based step count for bias correction
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

  // --- embedding: out[B*S, H] = wte[token] (+ wpe[position]) ---
  virtual void embedding_fwd(const Tensor& tokens, const Tensor& wte, const Tensor* wpe,
                             const Tensor& out, int B, int S, int H) = 0;
  virtual void embedding_bwd(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                             const Tensor* dwpe, int B, int S, int H) = 0;

  // --- norms over rows of width H (statistics recomputed from x in backward) ---
  virtual void layernorm_fwd(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                             std::int64_t rows, int H, float eps) = 0;
  virtual void layernorm_bwd(const Tensor& x, const Tensor& w, const Tensor& dy,
                             const Tensor& dx, const Tensor& dw, const Tensor& db,
                             std::int64_t rows, int H, float eps, bool acc) = 0;
  virtual void rmsnorm_fwd(const Tensor& x, const Tensor& w, const Tensor& y, std::int64_t rows,
                           int H, float eps) = 0;
  virtual void rmsnorm_bwd(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& dx,
                           const Tensor& dw, std::int64_t rows, int H, float eps, bool acc) = 0;

  // --- linear: y = x W^T + b (b may be empty) ---
  virtual void linear_fwd(const Tensor& x, const Tensor& W, const Tensor* b, const Tensor& y,
                          std::int64_t M, int K, int N) = 0;
  // dx = dy W (acc: +=), dW += dy^T x, db += colsum(dy). dx may be empty (not needed).
  virtual void linear_bwd(const Tensor& x, const Tensor& W, const Tensor& dy, const Tensor* dx,
                          const Tensor& dW, const Tensor* db, std::int64_t M, int K, int N,
                          bool acc) = 0;

  // --- naive attention ---
  // probs = softmax(causal(Q K^T * scale)), written in full (masked entries are 0).
  virtual void attn_softmax_fwd(const Tensor& qkv, const Tensor& probs, const AttnDims& a) = 0;
  // Always accumulates dQ and dK into the q and k parts of dqkv.
  virtual void attn_softmax_bwd(const Tensor& qkv, const Tensor& probs, const Tensor& dprobs,
                                const Tensor& dqkv, const AttnDims& a) = 0;
  // ctx = P V (P: [B, heads, S, S]).
  virtual void attn_pv_fwd(const Tensor& p, const Tensor& qkv, const Tensor& ctx,
                           const AttnDims& a) = 0;
  // dp = dctx V^T (acc_dp: +=); always accumulates dV = P^T dctx into the v part of dqkv.
  virtual void attn_pv_bwd(const Tensor& p, const Tensor& qkv, const Tensor& dctx,
                           const Tensor& dp, const Tensor& dqkv, const AttnDims& a,
                           bool acc_dp) = 0;

  // --- flash attention: tiled, online softmax, keeps only ctx and lse [B, heads, S] fp32 ---
  // Attention dropout (p > 0) uses the same mask bits as the naive path: index
  // ((b * heads + head) * S + i) * S + j of the probabilities.
  virtual void flash_fwd(const Tensor& qkv, const Tensor& ctx, const Tensor& lse,
                         const AttnDims& a, const DropoutKey& key, float p) = 0;
  // Always accumulates into dqkv.
  virtual void flash_bwd(const Tensor& qkv, const Tensor& ctx, const Tensor& lse,
                         const Tensor& dctx, const Tensor& dqkv, const AttnDims& a,
                         const DropoutKey& key, float p) = 0;

  // --- dropout: masks are made from their Philox key alone, then applied ---
  // mask[i] = philox_bits(key, i) >= dropout_threshold(p)  (1 = kept)
  virtual void dropout_mask(const Tensor& mask, const DropoutKey& key, float p,
                            std::int64_t n) = 0;
  // y = x * mask / (1 - p)
  virtual void dropout_fwd(const Tensor& x, const Tensor& mask, const Tensor& y, float p,
                           std::int64_t n) = 0;
  virtual void dropout_bwd(const Tensor& dy, const Tensor& mask, const Tensor& dx, float p,
                           std::int64_t n, bool acc) = 0;
  // out = res + x * mask / (1 - p); mask is empty when p == 0 (out = res + x).
  virtual void residual_fwd(const Tensor& res, const Tensor& x, const Tensor* mask,
                            const Tensor& out, float p, std::int64_t n) = 0;
  // dres (acc_res: +=) = dout; dx (acc_x: +=) = dout * mask / (1 - p).
  virtual void residual_bwd(const Tensor& dout, const Tensor* mask, const Tensor& dres,
                            const Tensor& dx, float p, std::int64_t n, bool acc_res,
                            bool acc_x) = 0;

  // --- activations ---
  virtual void gelu_fwd(const Tensor& x, const Tensor& y, std::int64_t n) = 0;  // tanh form
  virtual void gelu_bwd(const Tensor& x, const Tensor& dy, const Tensor& dx, std::int64_t n,
                        bool acc) = 0;
  // gu: [rows, 2F] (gate | up); y: [rows, F] = silu(gate) * up.
  virtual void swiglu_fwd(const Tensor& gu, const Tensor& y, std::int64_t rows, int F) = 0;
  virtual void swiglu_bwd(const Tensor& gu, const Tensor& dy, const Tensor& dgu,
                          std::int64_t rows, int F, bool acc) = 0;
  // RoPE (Hugging Face rotate_half layout) on the q and k parts; v is copied unchanged.
  virtual void rope_fwd(const Tensor& in, const Tensor& out, const AttnDims& a,
                        float theta) = 0;
  virtual void rope_bwd(const Tensor& dout, const Tensor& din, const AttnDims& a, float theta,
                        bool acc) = 0;

  // --- head and loss, fused: for rows of x, logits = x W^T (W: [V, H]) in chunks that never
  // exist whole; losses[r] = logsumexp - logit[target] (fp32); with dlogits = (softmax -
  // onehot) * scale: dx = dlogits W (overwritten), dW += dlogits^T x.
  virtual void head_loss(const Tensor& x, const Tensor& W, const Tensor& targets,
                         const Tensor& losses, const Tensor& dx, const Tensor& dW,
                         std::int64_t rows, int H, int V, float scale) = 0;

  // --- AdamW over segments of the flat parameter buffer. master is empty for fp32 models
  // (the parameters are the master weights). ---
  virtual void adamw(const Tensor& params, const Tensor& grads, const Tensor* master,
                     const Tensor& m, const Tensor& v, const std::vector<AdamSegment>& segs,
                     const AdamArgs& args) = 0;
  // fp32 master -> params in the model's dtype (after loading or initializing).
  virtual void cast(const Tensor& dst, const Tensor& src) = 0;
};

}  // namespace remat
