// The CUDA backend's entry for the block ops of the op table (core/graph/ops.def): each op's
// arguments unpacked onto its kernels' launch functions (cuda_ops.cpp), or checked and launched
// here for ops that have no other entry (QK-norm).
#include <algorithm>

#include "core/backend/cuda/cuda_args.h"
#include "core/backend/cuda/cuda_backend.h"
#include "core/util/error.h"
#include "kernels/layernorm.cuh"
#include "kernels/rmsnorm.cuh"

namespace remat::cuda {

void CudaBackend::run(OpKind op, Pass pass, const OpArgs& args) {
  switch (op) {
#define OP(id, ...)                                                   \
  case OpKind::id:                                                    \
    if (pass == Pass::Forward) fwd_##id(args); else bwd_##id(args); \
    return;
#include "core/graph/ops.def"
#undef OP
  }
  throw Error("cuda: unknown op " + std::to_string(static_cast<int>(op)));
}

namespace {
void no_offset(const OpArgs& a, const char* op) {
  if (a.w_offset != 0.0f) throw Error(std::string("cuda ") + op + ": a (w_offset + w) weight is not supported");
}
}  // namespace

void CudaBackend::fwd_LayerNorm(const OpArgs& a) {
  no_offset(a, "layernorm_fwd");
  layernorm_fwd(*a.in[0], *a.w, *a.b, *a.out[0], a.M, a.K, a.eps);
}
void CudaBackend::bwd_LayerNorm(const OpArgs& a) {
  layernorm_bwd(*a.in[0], *a.w, *a.dout[0], *a.din[0], *a.dw, *a.db, a.M, a.K, a.eps, a.acc[0]);
}
void CudaBackend::fwd_RmsNorm(const OpArgs& a) {
  rmsnorm_fwd(*a.in[0], *a.w, *a.out[0], a.M, a.K, a.eps, a.w_offset);
}
void CudaBackend::bwd_RmsNorm(const OpArgs& a) {
  rmsnorm_bwd(*a.in[0], *a.w, *a.dout[0], *a.din[0], *a.dw, a.M, a.K, a.eps, a.acc[0],
              a.w_offset);
}
// QK-norm: in[0] rows q (K) | k (N) | v (N); w the q weight, b the k weight.
namespace {
std::int64_t check_qk_norm(const OpArgs& a, const Tensor& x, const Tensor& y, const char* op) {
  no_offset(a, op);
  if (a.M <= 0 || a.K <= 0 || a.N <= 0)
    throw Error(std::string("cuda ") + op + ": bad shape M=" + std::to_string(a.M) +
                " K=" + std::to_string(a.K) + " N=" + std::to_string(a.N));
  const std::int64_t n = a.M * (a.K + 2 * static_cast<std::int64_t>(a.N));
  check_float(x, op, "qkv", n);
  check_float(y, op, "out", n);
  check_float(*a.w, op, "q weight", a.K);
  check_float(*a.b, op, "k weight", a.N);
  check_same(x, {&y, a.w, a.b}, op);
  return n;
}
}  // namespace

void CudaBackend::fwd_QkNorm(const OpArgs& a) {
  check_qk_norm(a, *a.in[0], *a.out[0], "qk_norm_fwd");
  activate();
  kernels::qk_norm_fwd(ft(*a.in[0]), a.in[0]->data, a.w->data, a.b->data, a.out[0]->data, a.M,
                       a.K, a.N, a.eps, compute_);
}
void CudaBackend::bwd_QkNorm(const OpArgs& a) {
  const char* op = "qk_norm_bwd";
  const std::int64_t n = check_qk_norm(a, *a.in[0], *a.dout[0], op);
  check_float(*a.din[0], op, "dqkv", n);
  check_float(*a.dw, op, "q weight gradient", a.K);
  check_float(*a.db, op, "k weight gradient", a.N);
  check_same(*a.in[0], {a.din[0], a.dw, a.db}, op);
  activate();
  float* part = reinterpret_cast<float*>(
      scratch(kernels::norm_bwd_scratch_bytes(a.M, std::max(a.K, a.N)), op));
  kernels::qk_norm_bwd(ft(*a.in[0]), a.in[0]->data, a.w->data, a.b->data, a.dout[0]->data,
                       a.din[0]->data, a.dw->data, a.db->data, a.M, a.K, a.N, a.eps, a.acc[0],
                       part, compute_);
}
void CudaBackend::fwd_Linear(const OpArgs& a) { linear_fwd(*a.in[0], *a.w, a.b, *a.out[0], a.M, a.K, a.N); }
void CudaBackend::bwd_Linear(const OpArgs& a) {
  linear_bwd(*a.in[0], *a.w, *a.dout[0], a.din[0], *a.dw, a.db, a.M, a.K, a.N, a.acc[0]);
}
void CudaBackend::fwd_Rope(const OpArgs& a) { rope_fwd(*a.in[0], *a.out[0], a.attn, a.rope); }
void CudaBackend::bwd_Rope(const OpArgs& a) { rope_bwd(*a.dout[0], *a.din[0], a.attn, a.rope, a.acc[0]); }
void CudaBackend::fwd_AttnSoftmax(const OpArgs& a) { attn_softmax_fwd(*a.in[0], *a.out[0], a.attn); }
void CudaBackend::bwd_AttnSoftmax(const OpArgs& a) {
  attn_softmax_bwd(*a.in[0], *a.out[0], *a.dout[0], *a.din[0], a.attn);
}
void CudaBackend::fwd_AttnDropout(const OpArgs& a) { dropout_fwd(*a.in[0], *a.in[1], *a.out[0], a.p, a.M); }
void CudaBackend::bwd_AttnDropout(const OpArgs& a) {
  dropout_bwd(*a.dout[0], *a.in[1], *a.din[0], a.p, a.M, a.acc[0]);
}
void CudaBackend::fwd_AttnPV(const OpArgs& a) { attn_pv_fwd(*a.in[0], *a.in[1], *a.out[0], a.attn); }
void CudaBackend::bwd_AttnPV(const OpArgs& a) {
  attn_pv_bwd(*a.in[0], *a.in[1], *a.dout[0], *a.din[0], *a.din[1], a.attn, a.acc[0]);
}
void CudaBackend::fwd_FlashAttn(const OpArgs& a) {
  flash_fwd(*a.in[0], *a.out[0], *a.out[1], a.attn, a.key, a.p);
}
void CudaBackend::bwd_FlashAttn(const OpArgs& a) {
  flash_bwd(*a.in[0], *a.out[0], *a.out[1], *a.dout[0], *a.din[0], a.attn, a.key, a.p);
}
void CudaBackend::fwd_Residual(const OpArgs& a) { residual_fwd(*a.in[0], *a.in[1], a.in[2], *a.out[0], a.p, a.M); }
void CudaBackend::bwd_Residual(const OpArgs& a) {
  residual_bwd(*a.dout[0], a.in[2], *a.din[0], *a.din[1], a.p, a.M, a.acc[0], a.acc[1]);
}
void CudaBackend::fwd_Gelu(const OpArgs& a) { gelu_fwd(*a.in[0], *a.out[0], a.M); }
void CudaBackend::bwd_Gelu(const OpArgs& a) { gelu_bwd(*a.in[0], *a.dout[0], *a.din[0], a.M, a.acc[0]); }
void CudaBackend::fwd_SwiGlu(const OpArgs& a) { swiglu_fwd(*a.in[0], *a.out[0], a.M, a.K); }
void CudaBackend::bwd_SwiGlu(const OpArgs& a) { swiglu_bwd(*a.in[0], *a.dout[0], *a.din[0], a.M, a.K, a.acc[0]); }
void CudaBackend::fwd_DropoutMask(const OpArgs& a) { dropout_mask(*a.out[0], a.key, a.p, a.M); }
void CudaBackend::bwd_DropoutMask(const OpArgs&) {}  // masks carry no gradient

}  // namespace remat::cuda
