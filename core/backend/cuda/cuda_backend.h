// The CUDA backend: every op of backend.h on one GPU, in librematcuda.so.
//
// Streams: ops run on a compute stream in issue order. copy() between host and device runs on
// one of two copy streams, one per direction (device to host and host to device, so that an
// offload and a prefetch can use both directions of the link at once), after an event recorded
// on the compute stream (so it sees everything issued before it) and after every unfinished
// copy on either stream that touched one of its two blocks (a prefetch waits for the offload
// that filled its host buffer). join_copies() makes the compute stream wait for every copy to
// the device issued so far; copies to the host produce nothing the compute stream reads, and
// their source blocks stay parked in the pool until they finish. Copies within the device and
// fill_zero run on the compute stream, after unfinished copies of their block. read/read_bytes/write_bytes are synchronous.
//
// Memory: Space::Device comes from a caching allocator over cudaMalloc, Space::Host from a
// pinned (cudaHostAlloc) caching pool; see caching_allocator.h.
//
// Workspace (workspace_bytes, a pure function of the config): a fixed 32 MiB for cuBLAS and
// cuBLASLt, then one scratch area every op uses in turn (ops run one after another on the
// compute stream): naive attention's per-head [B, S, S] buffer, flash backward's D vector,
// the head's logits chunks, norm and bias partial sums, the embedding backward's sort.
//
// Determinism: no floating-point atomics in our kernels, fixed GEMM algorithms and workspace,
// reductions split by sizes only; the same inputs give the same bits.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "core/backend/backend.h"
#include "core/backend/cuda/caching_allocator.h"
#include "core/backend/cuda_sizing.h"
#include "kernels/flash_attn.cuh"

namespace remat {
struct MlaPackDims;  // core/backend/mla_pack.h
}

namespace remat::cuda {

class Gemm;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  MemoryResource& memory(Space s) override;
  std::uint64_t workspace_bytes(const ModelConfig& m) const override;
  void set_workspace(const Tensor& ws) override;
  void synchronize() override;
  bool asynchronous() const override { return true; }
  void join_copies() override;
  std::uint64_t available_memory() const override;
  std::vector<std::pair<std::string, std::string>> describe() const override;

  void fill_zero(const Tensor& t) override;
  void copy(const Tensor& dst, const Tensor& src) override;
  void add_into(const Tensor& dst, const Tensor& src) override;
  void read(const Tensor& src, std::vector<float>& out) override;
  void read_bytes(const Tensor& src, void* out) override;
  void write_bytes(const Tensor& dst, const void* in) override;

  // The block ops of the op table, dispatched to fwd_<Op> / bwd_<Op> (cuda_op_dispatch.cpp).
  void run(OpKind op, Pass pass, const OpArgs& args) override;
  void embedding_fwd(const Tensor& tokens, const Tensor& wte, const Tensor* wpe,
                     const Tensor& out, int B, int S, int H, float scale) override;
  void embedding_bwd(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                     const Tensor* dwpe, int B, int S, int H, float scale) override;
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
  // QK-norm split over tensor-parallel ranks (kernels/qk_norm.cu).
  void qk_norm_sums(Pass pass, const OpArgs& a, const Tensor& sums) override;
  void qk_norm_split(Pass pass, const OpArgs& a, const Tensor& sums, int q_width,
                     int k_width) override;
  // kernels/moe.cu: the experts' projections, both passes (ExpertLinear)
  void expert_linear(const OpArgs& a, Pass pass);
  void linear_fwd(const Tensor& x, const Tensor& W, const Tensor* b, const Tensor& y,
                  std::int64_t M, int K, int N);
  void linear_bwd(const Tensor& x, const Tensor& W, const Tensor& dy, const Tensor* dx,
                  const Tensor& dW, const Tensor* db, std::int64_t M, int K, int N,
                  bool acc);
  // sinks: one logit per head (gpt-oss) or null; dsinks, their gradient, accumulated.
  void attn_softmax_fwd(const Tensor& qkv, const Tensor& probs, const AttnDims& a,
                        const Tensor* sinks = nullptr);
  void attn_softmax_bwd(const Tensor& qkv, const Tensor& probs, const Tensor& dprobs,
                        const Tensor& dqkv, const AttnDims& a, const Tensor* sinks = nullptr,
                        const Tensor* dsinks = nullptr);
  void attn_pv_fwd(const Tensor& p, const Tensor& qkv, const Tensor& ctx,
                   const AttnDims& a);
  void attn_pv_bwd(const Tensor& p, const Tensor& qkv, const Tensor& dctx, const Tensor& dp,
                   const Tensor& dqkv, const AttnDims& a, bool acc_dp);
  void flash_fwd(const Tensor& qkv, const Tensor& ctx, const Tensor& lse, const AttnDims& a,
                 const DropoutKey& key, float p, const Tensor* sinks = nullptr);
  void flash_bwd(const Tensor& qkv, const Tensor& ctx, const Tensor& lse, const Tensor& dctx,
                 const Tensor& dqkv, const AttnDims& a, const DropoutKey& key,
                 float p, const Tensor* sinks = nullptr, const Tensor* dsinks = nullptr);
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
  void moe_aux_loss(const Tensor& aux, int layers, int experts, std::int64_t tokens, double coef,
                    double grad_scale) override;
  void head_loss(const Tensor& x, const Tensor& W, const Tensor& targets, const Tensor& losses,
                 const Tensor& dx, const Tensor& dW, std::int64_t rows, int H, int V,
                 float scale, float softcap,
                 float logit_mult) override;
  void adamw(const Tensor& params, const Tensor& grads, const Tensor* master, const Tensor& m,
             const Tensor& v, const std::vector<AdamSegment>& segs,
             const AdamArgs& args) override;
  void cast(const Tensor& dst, const Tensor& src) override;

  // --- CUDA specifics (tests, profiler) ---
  int device() const { return device_; }
  cudaStream_t compute_stream() const { return compute_; }
  cudaStream_t copy_stream(bool to_device) const { return to_device ? to_device_ : to_host_; }
  CachingPool& device_pool() { return *device_pool_; }
  CachingPool& host_pool() { return *host_pool_; }
  // Flash attention implementation (Auto: tensor cores where supported). Env
  // REMAT_FLASH_IMPL=scalar|tc sets the initial value.
  void set_flash_impl(kernels::FlashImpl impl) { flash_impl_ = impl; }
  kernels::FlashImpl flash_impl() const { return flash_impl_; }
  // Groups of 16 query rows per warp in the tensor-core flash forward and dQ kernels (1 or 2;
  // the same bits either way). Env REMAT_FLASH_ROWS=16|32.
  void set_flash_row_groups(int g) { flash_row_groups_ = g; }
  int flash_row_groups() const { return flash_row_groups_; }
  // Naive attention's probabilities: the fused tensor-core kernel where it applies (true), or
  // cuBLAS scores in fp32 plus a softmax kernel per head. Env REMAT_ATTN_PROBS=fused|gemm.
  void set_fused_probs(bool on) { fused_probs_ = on; }
  bool fused_probs() const { return fused_probs_; }
  // Rows of the head's logits chunk: fp32 logits of about chunk_bytes, in multiples of 64 rows.
  static std::int64_t head_chunk_rows(std::int64_t rows, int V,
                                      std::size_t chunk_bytes = kHeadChunkBytes);
  static constexpr std::size_t kHeadChunkBytes = kCudaHeadChunkBytes;
  // The chunk this backend uses (workspace_bytes follows it). Env REMAT_HEAD_CHUNK_MIB.
  void set_head_chunk_bytes(std::size_t b) { head_chunk_bytes_ = b; }
  std::size_t head_chunk_bytes() const { return head_chunk_bytes_; }
  static constexpr std::size_t kGemmWorkspace = kCudaGemmWorkspaceBytes;

 private:
  // rope_fwd and rope_bwd (sign +1 and -1): the rotation, or the temperature (RopeTable).
  void rope_run(const Tensor& in, const Tensor& out, const AttnDims& a, const RopeTable& r, float sign, bool acc,
                const char* op);
  // One pair per op of core/graph/ops.def.
#define OP(id, ...) void fwd_##id(const OpArgs& a); void bwd_##id(const OpArgs& a);
#include "core/graph/ops.def"
#undef OP

  void activate() const;  // cudaSetDevice when the calling thread is on another device
  char* scratch(std::size_t bytes, const char* op) const;
  void check_stream_error(const char* op) const;
  void sync_copies();  // waits on the host for both copy streams
  // The compute stream waits for unfinished copies of t's block (an offload still reading it).
  void wait_for_copies(const Tensor& t);
  // MlaPack's cos and sin tables [S, r/2] each, made on the host as the CPU backend makes them
  // (the same bits), kept for the rotation they belong to and copied into the op scratch on the
  // compute stream; returns the device tables (cos, then sin). cuda_mla.cpp.
  const float* mla_tables(const MlaPackDims& m, const RopeTable& rope, const char* op);

  int device_;
  cudaStream_t compute_ = nullptr, to_host_ = nullptr, to_device_ = nullptr;
  cudaEvent_t copy_join_ = nullptr;
  std::unique_ptr<CachingPool> device_pool_, host_pool_;
  std::unique_ptr<Gemm> gemm_;
  char* ws_ = nullptr;
  std::size_t ws_bytes_ = 0;
  kernels::FlashImpl flash_impl_ = kernels::FlashImpl::Auto;
  bool fused_probs_ = true;
  int flash_row_groups_ = 1;
  std::size_t head_chunk_bytes_ = kHeadChunkBytes;
  // mla_tables: the rotation the tables belong to (S, pairs, scaling and inverse frequencies as
  // bits) and the tables.
  std::vector<std::uint32_t> mla_key_;
  std::vector<float> mla_tables_;
  cudaDeviceProp props_{};
};

}  // namespace remat::cuda
