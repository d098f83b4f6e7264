// The reference backend: our own loops for every op, GEMMs through OpenBLAS. One thread count,
// fixed for the run, for everything: the pool has that many lanes (the caller is lane 0), our
// ops split their work over them, and each GEMM is split over them too, every lane calling
// OpenBLAS single-threaded on its slice (cpu_gemm_parts.h), so no more threads than that ever
// compute at once. Deterministic: the same inputs give the same bits at a given thread count.
//
// Both memory spaces are host heap. Compute ops refuse tensors in the host space (as a GPU
// would), so executor bugs show up here first. GEMM operands in bf16 are staged to fp32 in the
// workspace; nothing else is allocated inside an op.
#pragma once
#include <memory>
#include <vector>

#include "core/backend/backend.h"

namespace remat {

namespace cpu {
class ThreadPool;
class Arena;
struct Lanes;
}

class CpuBackend final : public Backend {
 public:
  // threads: lanes of the pool for our ops and GEMMs (fixed for the whole run and recorded); 0 = 2.
  explicit CpuBackend(int threads = 0);
  ~CpuBackend() override;
  int threads() const;

  std::string name() const override { return "cpu"; }
  // The block ops of the op table, dispatched to fwd_<Op> / bwd_<Op> below.
  void run(OpKind op, Pass pass, const OpArgs& args) override;
  MemoryResource& memory(Space s) override;
  std::uint64_t workspace_bytes(const ModelConfig& m) const override;
  void set_workspace(const Tensor& ws) override;
  std::uint64_t available_memory() const override;  // MemAvailable from /proc/meminfo
  bool host_addressable() const override { return true; }
  int host_threads() const override { return threads_; }
  std::vector<std::pair<std::string, std::string>> describe() const override;

  // cpu_backend.cpp
  void fill_zero(const Tensor& t) override;
  void copy(const Tensor& dst, const Tensor& src) override;
  void add_into(const Tensor& dst, const Tensor& src) override;
  void read(const Tensor& src, std::vector<float>& out) override;
  void read_bytes(const Tensor& src, void* out) override;
  void write_bytes(const Tensor& dst, const void* in) override;

  // cpu_elementwise.cpp
  void embedding_fwd(const Tensor& tokens, const Tensor& wte, const Tensor* wpe,
                     const Tensor& out, int B, int S, int H, float scale) override;
  void embedding_bwd(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                     const Tensor* dwpe, int B, int S, int H, float scale) override;
  void dropout_mask(const Tensor& mask, const DropoutKey& key, float p, std::int64_t n) override;
  void dropout_fwd(const Tensor& x, const Tensor& mask, const Tensor& y, float p,
                   std::int64_t n) override;
  void dropout_bwd(const Tensor& dy, const Tensor& mask, const Tensor& dx, float p,
                   std::int64_t n, bool acc) override;
  // The branch x times the dropout's mask / (1 - p) and times `mult`.
  void residual_fwd(const Tensor& res, const Tensor& x, const Tensor* mask, const Tensor& out,
                    float p, std::int64_t n, float mult = 1.0f);
  void residual_bwd(const Tensor& dout, const Tensor* mask, const Tensor& dres, const Tensor& dx,
                    float p, std::int64_t n, bool acc_res, bool acc_x, float mult = 1.0f);
  void gelu_fwd(const Tensor& x, const Tensor& y, std::int64_t n);
  void gelu_bwd(const Tensor& x, const Tensor& dy, const Tensor& dx, std::int64_t n,
                bool acc);
  void swiglu_fwd(const Tensor& gu, const Tensor& y, std::int64_t rows, int F);
  void swiglu_bwd(const Tensor& gu, const Tensor& dy, const Tensor& dgu, std::int64_t rows,
                  int F, bool acc);
  void rope_fwd(const Tensor& in, const Tensor& out, const AttnDims& a, const RopeTable& r);
  void rope_bwd(const Tensor& dout, const Tensor& din, const AttnDims& a, const RopeTable& r,
                bool acc);
  void cast(const Tensor& dst, const Tensor& src) override;

  // cpu_norms.cpp
  void layernorm_fwd(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                     std::int64_t rows, int H, float eps) override;
  void layernorm_bwd(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& dx,
                     const Tensor& dw, const Tensor& db, std::int64_t rows, int H, float eps,
                     bool acc) override;
  void rmsnorm_fwd(const Tensor& x, const Tensor& w, const Tensor& y, std::int64_t rows, int H,
                   float eps, float w_offset) override;
  void rmsnorm_bwd(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& dx,
                   const Tensor& dw, std::int64_t rows, int H, float eps, bool acc,
                   float w_offset) override;
  void qk_norm_sums(Pass pass, const OpArgs& a, const Tensor& sums) override;
  void qk_norm_split(Pass pass, const OpArgs& a, const Tensor& sums, int q_width, int k_width) override;

  // cpu_gemm.cpp
  void linear_fwd(const Tensor& x, const Tensor& W, const Tensor* b, const Tensor& y,
                  std::int64_t M, int K, int N);
  void linear_bwd(const Tensor& x, const Tensor& W, const Tensor& dy, const Tensor* dx,
                  const Tensor& dW, const Tensor* db, std::int64_t M, int K, int N,
                  bool acc);
  // The same on given lanes with the workspace of `ws` (one lane of an expert group: no pool).
  void linear_fwd(const cpu::Lanes& lanes, cpu::Arena& ws, const Tensor& x, const Tensor& W, const Tensor* b,
                  const Tensor& y, std::int64_t M, int K, int N);
  void linear_bwd(const cpu::Lanes& lanes, cpu::Arena& ws, const Tensor& x, const Tensor& W, const Tensor& dy,
                  const Tensor* dx, const Tensor& dW, const Tensor* db, std::int64_t M, int K, int N, bool acc);
  // How many experts the last ExpertLinear ran whole on one lane each (cpu_expert_gemm.cpp).
  int experts_on_one_lane() const { return experts_on_one_lane_; }
  // The workspace bytes those take for these tensors (their dtypes), forward or backward.
  std::uint64_t linear_ws(Pass pass, const Tensor& x, const Tensor& W, const Tensor& y_or_dy, const Tensor* dx,
                          const Tensor* dW, std::int64_t M, int K, int N) const;
  void moe_aux_loss(const Tensor& aux, int layers, int experts, std::int64_t tokens, double coef,
                    double grad_scale) override;
  void head_loss(const Tensor& x, const Tensor& W, const Tensor& targets, const Tensor& losses,
                 const Tensor& dx, const Tensor& dW, std::int64_t rows, int H, int V,
                 float scale, float softcap,
                 float logit_mult) override;

  // cpu_attention.cpp: on per-head GEMMs. sinks: one logit per head (gpt-oss) or null, its
  // gradient dsinks accumulated (cpu_attention_sinks.h).
  void attn_softmax_fwd(const Tensor& qkv, const Tensor& probs, const AttnDims& a,
                        const Tensor* sinks = nullptr);
  void attn_softmax_bwd(const Tensor& qkv, const Tensor& probs, const Tensor& dprobs,
                        const Tensor& dqkv, const AttnDims& a, const Tensor* sinks = nullptr,
                        const Tensor* dsinks = nullptr);
  void attn_pv_fwd(const Tensor& p, const Tensor& qkv, const Tensor& ctx,
                   const AttnDims& a);
  void attn_pv_bwd(const Tensor& p, const Tensor& qkv, const Tensor& dctx, const Tensor& dp,
                   const Tensor& dqkv, const AttnDims& a, bool acc_dp);
  // cpu_attention_ref.cpp: the reference loops the four run with no kernel set active.
  void attn_softmax_fwd_ref(const Tensor& qkv, const Tensor& probs, const AttnDims& a,
                            const Tensor* sinks = nullptr);
  void attn_softmax_bwd_ref(const Tensor& qkv, const Tensor& probs, const Tensor& dprobs,
                            const Tensor& dqkv, const AttnDims& a, const Tensor* sinks = nullptr,
                            const Tensor* dsinks = nullptr);
  void attn_pv_fwd_ref(const Tensor& p, const Tensor& qkv, const Tensor& ctx, const AttnDims& a);
  void attn_pv_bwd_ref(const Tensor& p, const Tensor& qkv, const Tensor& dctx, const Tensor& dp,
                       const Tensor& dqkv, const AttnDims& a, bool acc_dp);

  // cpu_flash.cpp: on GEMMs over query blocks and key tiles
  void flash_fwd(const Tensor& qkv, const Tensor& ctx, const Tensor& lse, const AttnDims& a,
                 const DropoutKey& key, float p, const Tensor* sinks = nullptr);
  void flash_bwd(const Tensor& qkv, const Tensor& ctx, const Tensor& lse, const Tensor& dctx,
                 const Tensor& dqkv, const AttnDims& a, const DropoutKey& key,
                 float p, const Tensor* sinks = nullptr, const Tensor* dsinks = nullptr);
  // cpu_flash_ref.cpp: the reference loops the two run with no kernel set active.
  void flash_fwd_ref(const Tensor& qkv, const Tensor& ctx, const Tensor& lse, const AttnDims& a,
                     const DropoutKey& key, float p, const Tensor* sinks = nullptr);
  void flash_bwd_ref(const Tensor& qkv, const Tensor& ctx, const Tensor& lse, const Tensor& dctx,
                     const Tensor& dqkv, const AttnDims& a, const DropoutKey& key, float p,
                     const Tensor* sinks = nullptr, const Tensor* dsinks = nullptr);

  // cpu_moe.cpp: the experts' projections, both passes (ExpertLinear)
  void expert_linear(const OpArgs& a, Pass pass);
  // cpu_expert_gemm.cpp: expert e's GEMM over its rows [start[e], start[e] + rows[e]), the experts
  // grouped over the lanes.
  void expert_gemms(const OpArgs& a, Pass pass, const std::vector<std::int64_t>& start,
                    const std::vector<std::int64_t>& rows);

  // cpu_adamw.cpp
  void adamw(const Tensor& params, const Tensor& grads, const Tensor* master, const Tensor& m,
             const Tensor& v, const std::vector<AdamSegment>& segs,
             const AdamArgs& args) override;

  // Workspace each op needs for these shapes (the same layout code the ops carve with);
  // workspace_bytes is the largest of these over the model's ops. bf16: operands in bf16.
  std::uint64_t ws_linear_fwd(std::int64_t M, int K, int N, bool bf16) const;
  std::uint64_t ws_linear_bwd(std::int64_t M, int K, int N, bool bf16) const;
  std::uint64_t ws_head_loss(std::int64_t rows, int H, int V, bool bf16) const;
  std::uint64_t ws_norm_bwd(std::int64_t rows) const;
  std::uint64_t ws_embedding_bwd(int B, int S, int H, int V) const;
  std::uint64_t ws_rope(const AttnDims& a) const;
  std::uint64_t ws_attention(const AttnDims& a) const;  // the four naive ops
  std::uint64_t ws_flash(const AttnDims& a) const;      // forward and backward
  std::uint64_t ws_moe_route(const MoeDims& d) const;   // forward and backward

 private:
  // rope_fwd and rope_bwd (sign +1 and -1): the rotation, or the temperature (RopeTable).
  void rope_run(const Tensor& in, const Tensor& out, const AttnDims& a, const RopeTable& r, float sign, bool acc,
                const char* op);
  // One pair per op of core/graph/ops.def, defined in the file of that op's kernels.
#define OP(id, ...) void fwd_##id(const OpArgs& a); void bwd_##id(const OpArgs& a);
#include "core/graph/ops.def"
#undef OP

  void copy_bytes(void* dst, const void* src, std::uint64_t n);  // on the pool, no overlap

  int threads_;
  std::unique_ptr<cpu::ThreadPool> pool_;
  HeapMemory device_, host_;
  Tensor ws_;
  int experts_on_one_lane_ = 0;
};

}  // namespace remat
