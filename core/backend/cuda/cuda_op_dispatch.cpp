// The CUDA backend's entry for the block ops of the op table (core/graph/ops.def): each op's
// arguments unpacked onto its kernels' launch functions (cuda_ops.cpp). Ops whose CUDA side is
// one file define their fwd_<Op> / bwd_<Op> there instead (kernels/geglu.cu, kernels/qk_norm.cu,
// kernels/swiglu_clamped.cu).
#include "core/backend/cuda/cuda_args.h"
#include "core/backend/cuda/cuda_backend.h"
#include "core/util/error.h"

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

void CudaBackend::fwd_LayerNorm(const OpArgs& a) {
  check_no_offset(a, "layernorm_fwd");
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
void CudaBackend::fwd_Linear(const OpArgs& a) { linear_fwd(*a.in[0], *a.w, a.b, *a.out[0], a.M, a.K, a.N); }
void CudaBackend::bwd_Linear(const OpArgs& a) {
  linear_bwd(*a.in[0], *a.w, *a.dout[0], a.din[0], *a.dw, a.db, a.M, a.K, a.N, a.acc[0]);
}
void CudaBackend::fwd_Rope(const OpArgs& a) { rope_fwd(*a.in[0], *a.out[0], a.attn, a.rope); }
void CudaBackend::bwd_Rope(const OpArgs& a) { rope_bwd(*a.dout[0], *a.din[0], a.attn, a.rope, a.acc[0]); }
void CudaBackend::fwd_AttnSoftmax(const OpArgs& a) {
  attn_softmax_fwd(*a.in[0], *a.out[0], a.attn, a.w);
}
void CudaBackend::bwd_AttnSoftmax(const OpArgs& a) {
  attn_softmax_bwd(*a.in[0], *a.out[0], *a.dout[0], *a.din[0], a.attn, a.w, a.dw);
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
  flash_fwd(*a.in[0], *a.out[0], *a.out[1], a.attn, a.key, a.p, a.w);
}
void CudaBackend::bwd_FlashAttn(const OpArgs& a) {
  flash_bwd(*a.in[0], *a.out[0], *a.out[1], *a.dout[0], *a.din[0], a.attn, a.key, a.p, a.w, a.dw);
}
void CudaBackend::fwd_Residual(const OpArgs& a) {
  residual_fwd(*a.in[0], *a.in[1], a.in[2], *a.out[0], a.p, a.M, a.branch_mult);
}
void CudaBackend::bwd_Residual(const OpArgs& a) {
  residual_bwd(*a.dout[0], a.in[2], *a.din[0], *a.din[1], a.p, a.M, a.acc[0], a.acc[1], a.branch_mult);
}
void CudaBackend::fwd_Gelu(const OpArgs& a) { gelu_fwd(*a.in[0], *a.out[0], a.M); }
void CudaBackend::bwd_Gelu(const OpArgs& a) { gelu_bwd(*a.in[0], *a.dout[0], *a.din[0], a.M, a.acc[0]); }
void CudaBackend::fwd_SwiGlu(const OpArgs& a) { swiglu_fwd(*a.in[0], *a.out[0], a.M, a.K); }
void CudaBackend::bwd_SwiGlu(const OpArgs& a) { swiglu_bwd(*a.in[0], *a.dout[0], *a.din[0], a.M, a.K, a.acc[0]); }
void CudaBackend::fwd_DropoutMask(const OpArgs& a) { dropout_mask(*a.out[0], a.key, a.p, a.M); }
void CudaBackend::bwd_DropoutMask(const OpArgs&) {}  // masks carry no gradient

}  // namespace remat::cuda
