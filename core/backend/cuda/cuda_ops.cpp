// CudaBackend: the compute ops. Arguments are checked on the host (dtype, space, element
// counts) before anything is queued; kernels come from kernels/, products from Gemm.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/backend/cuda/cuda_args.h"
#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/gemm.h"
#include "core/util/error.h"
#include "kernels/adamw.cuh"
#include "kernels/add.cuh"
#include "kernels/attn_probs.cuh"
#include "kernels/attn_softmax.cuh"
#include "kernels/cast.cuh"
#include "kernels/cross_entropy.cuh"
#include "kernels/dropout.cuh"
#include "kernels/embedding.cuh"
#include "kernels/flash_attn.cuh"
#include "kernels/gelu.cuh"
#include "kernels/layernorm.cuh"
#include "kernels/reduce.cuh"
#include "kernels/residual.cuh"
#include "kernels/rmsnorm.cuh"
#include "kernels/rope.cuh"
#include "kernels/swiglu.cuh"

namespace remat::cuda {

using kernels::FType;

namespace {

void check_dims(const AttnDims& a, const char* op) {
  if (a.B <= 0 || a.S <= 0 || a.heads <= 0 || a.kv_heads <= 0 || a.d <= 0 || a.dv < 0 ||
      a.heads % a.kv_heads != 0)
    throw Error(std::string("cuda ") + op + ": bad attention dims B=" + std::to_string(a.B) +
                " S=" + std::to_string(a.S) + " heads=" + std::to_string(a.heads) +
                " kv_heads=" + std::to_string(a.kv_heads) + " d=" + std::to_string(a.d) +
                " dv=" + std::to_string(a.dv));
  if (a.window < 0 || a.chunk < 0 || (a.window > 0 && a.chunk > 0))
    throw Error(std::string("cuda ") + op + ": window and chunk must be 0 (none) or positive, not both, got " +
                std::to_string(a.window) + " and " + std::to_string(a.chunk));
  if (!(a.softcap >= 0.0f) || !std::isfinite(a.softcap))
    throw Error(std::string("cuda ") + op + ": softcap must be 0 (none) or positive, got " +
                std::to_string(a.softcap));
}

void check_p(float p, const char* op) {
  if (!(p >= 0.0f && p < 1.0f))
    throw Error(std::string("cuda ") + op + ": dropout p must be in [0, 1), got " +
                std::to_string(p));
}

cudaDataType cdt(const Tensor& t) { return t.dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F; }
cudaDataType cdt(FType t) { return t == FType::BF16 ? CUDA_R_16BF : CUDA_R_32F; }

float keep_scale(float p) { return p > 0.0f ? 1.0f / (1.0f - p) : 1.0f; }

using kernels::align256;  // the scratch layouts of kernels/scratch_bytes.h

// The packed q|k|v [B, S, qkv_width] (value heads v_dim() wide) and ctx [B, S, heads · v_dim()].
std::int64_t qkv_numel(const AttnDims& a) {
  return static_cast<std::int64_t>(a.B) * a.S * a.qkv_width();
}
std::int64_t probs_numel(const AttnDims& a) {
  return static_cast<std::int64_t>(a.B) * a.heads * a.S * a.S;
}
std::int64_t ctx_numel(const AttnDims& a) {
  return static_cast<std::int64_t>(a.B) * a.S * a.ctx_width();
}
// Column of kv head g's value in a qkv row.
std::size_t v_col(const AttnDims& a, int g) {
  return static_cast<std::size_t>(a.heads + a.kv_heads) * a.d +
         static_cast<std::size_t>(g) * a.v_dim();
}

// A device-side mask pointer, or null when p == 0 and no mask is given.
const std::uint8_t* mask_ptr(const Tensor* mask, float p, std::int64_t n, const char* op) {
  check_p(p, op);
  if (mask && *mask) {
    check_dtype(*mask, DType::U8, op, "mask", n);
    return mask->as<const std::uint8_t>();
  }
  if (p > 0.0f) throw Error(std::string("cuda ") + op + ": p > 0 needs a mask");
  return nullptr;
}

}  // namespace

// --- element-wise ---

void CudaBackend::add_into(const Tensor& dst, const Tensor& src) {
  check_float(dst, "add_into", "dst", src.numel);
  check_float(src, "add_into", "src", dst.numel);
  activate();
  kernels::add_into(ft(dst), dst.data, ft(src), src.data, dst.numel, compute_);
}

void CudaBackend::cast(const Tensor& dst, const Tensor& src) {
  check_float(dst, "cast", "dst", src.numel);
  check_float(src, "cast", "src", dst.numel);
  activate();
  kernels::cast(ft(dst), dst.data, ft(src), src.data, dst.numel, compute_);
}

void CudaBackend::dropout_mask(const Tensor& mask, const DropoutKey& key, float p,
                               std::int64_t n) {
  const char* op = "dropout_mask";
  check_p(p, op);
  check_n(n, op);
  check_dtype(mask, DType::U8, op, "mask", n);
  activate();
  kernels::dropout_mask(mask.as<std::uint8_t>(), key, dropout_threshold(p), n, compute_);
}

void CudaBackend::dropout_fwd(const Tensor& x, const Tensor& mask, const Tensor& y, float p,
                              std::int64_t n) {
  const char* op = "dropout_fwd";
  check_n(n, op);
  check_float(x, op, "x", n);
  check_float(y, op, "y", n);
  check_same(x, {&y}, op);
  const std::uint8_t* m = mask_ptr(&mask, p, n, op);
  activate();
  if (!m) {  // p == 0 without a mask: a copy
    kernels::cast(ft(y), y.data, ft(x), x.data, n, compute_);
    return;
  }
  kernels::dropout_fwd(ft(x), x.data, m, y.data, keep_scale(p), n, compute_);
}

void CudaBackend::dropout_bwd(const Tensor& dy, const Tensor& mask, const Tensor& dx, float p,
                              std::int64_t n, bool acc) {
  const char* op = "dropout_bwd";
  check_n(n, op);
  check_float(dy, op, "dy", n);
  check_float(dx, op, "dx", n);
  check_same(dy, {&dx}, op);
  const std::uint8_t* m = mask_ptr(&mask, p, n, op);
  activate();
  if (!m) {
    if (acc) kernels::add_into(ft(dx), dx.data, ft(dy), dy.data, n, compute_);
    else kernels::cast(ft(dx), dx.data, ft(dy), dy.data, n, compute_);
    return;
  }
  kernels::dropout_bwd(ft(dy), dy.data, m, dx.data, keep_scale(p), n, acc, compute_);
}

void CudaBackend::residual_fwd(const Tensor& res, const Tensor& x, const Tensor* mask,
                               const Tensor& out, float p, std::int64_t n, float mult) {
  const char* op = "residual_fwd";
  check_n(n, op);
  check_float(res, op, "res", n);
  check_float(x, op, "x", n);
  check_float(out, op, "out", n);
  check_same(res, {&x, &out}, op);
  const std::uint8_t* m = mask_ptr(mask, p, n, op);
  activate();
  kernels::residual_fwd(ft(res), res.data, x.data, m, out.data, keep_scale(p) * mult, n, compute_);
}

void CudaBackend::residual_bwd(const Tensor& dout, const Tensor* mask, const Tensor& dres,
                               const Tensor& dx, float p, std::int64_t n, bool acc_res,
                               bool acc_x, float mult) {
  const char* op = "residual_bwd";
  check_n(n, op);
  check_float(dout, op, "dout", n);
  check_float(dres, op, "dres", n);
  check_float(dx, op, "dx", n);
  check_same(dout, {&dres, &dx}, op);
  const std::uint8_t* m = mask_ptr(mask, p, n, op);
  activate();
  kernels::residual_bwd(ft(dout), dout.data, m, dres.data, dx.data, keep_scale(p) * mult, n, acc_res,
                        acc_x, compute_);
}

namespace {

// An elementwise activation's operands: x, y (forward) or dy, and dx (backward), n elements.
void check_act(const char* op, const Tensor& x, const Tensor& y, const Tensor* dx, std::int64_t n) {
  check_n(n, op);
  check_float(x, op, "x", n);
  check_float(y, op, dx ? "dy" : "y", n);
  if (dx) check_float(*dx, op, "dx", n);
  check_same(x, {&y, dx}, op);
}

}  // namespace

void CudaBackend::gelu_fwd(const Tensor& x, const Tensor& y, std::int64_t n) {
  check_act("gelu_fwd", x, y, nullptr, n);
  activate();
  kernels::gelu_fwd(ft(x), x.data, y.data, n, compute_);
}

void CudaBackend::gelu_bwd(const Tensor& x, const Tensor& dy, const Tensor& dx, std::int64_t n,
                           bool acc) {
  check_act("gelu_bwd", x, dy, &dx, n);
  activate();
  kernels::gelu_bwd(ft(x), x.data, dy.data, dx.data, n, acc, compute_);
}

// The exact GELU: the op table's entry points.
void CudaBackend::fwd_GeluErf(const OpArgs& a) {
  check_act("gelu_erf_fwd", *a.in[0], *a.out[0], nullptr, a.M);
  activate();
  kernels::gelu_erf_fwd(ft(*a.in[0]), a.in[0]->data, a.out[0]->data, a.M, compute_);
}

void CudaBackend::bwd_GeluErf(const OpArgs& a) {
  check_act("gelu_erf_bwd", *a.in[0], *a.dout[0], a.din[0], a.M);
  activate();
  kernels::gelu_erf_bwd(ft(*a.in[0]), a.in[0]->data, a.dout[0]->data, a.din[0]->data, a.M,
                        a.acc[0], compute_);
}

void CudaBackend::swiglu_fwd(const Tensor& gu, const Tensor& y, std::int64_t rows, int F) {
  check_gated("swiglu_fwd", gu, y, nullptr, rows, F);
  activate();
  kernels::swiglu_fwd(ft(gu), gu.data, y.data, rows, F, compute_);
}

void CudaBackend::swiglu_bwd(const Tensor& gu, const Tensor& dy, const Tensor& dgu,
                             std::int64_t rows, int F, bool acc) {
  check_gated("swiglu_bwd", gu, dy, &dgu, rows, F);
  activate();
  kernels::swiglu_bwd(ft(gu), gu.data, dy.data, dgu.data, rows, F, acc, compute_);
}

namespace {

// The frequencies come from the model (core/model/rope_scaling.h), as on the CPU.

void check_rope_table(const AttnDims& a, const RopeTable& r, const char* op) {
  if (a.d % 2 != 0) throw Error(std::string("cuda ") + op + ": head dim must be even for RoPE");
  if (r.rotary_dim <= 0 || r.rotary_dim % 2 != 0 || r.rotary_dim > a.d || !r.inv_freq)
    throw Error(std::string("cuda ") + op + ": rotary dim " + std::to_string(r.rotary_dim) +
                " must be even, positive and at most the head dim " + std::to_string(a.d));
  if (!std::isfinite(r.attention_scaling))
    throw Error(std::string("cuda ") + op + ": attention scaling must be finite, got " +
                std::to_string(r.attention_scaling));
}

}  // namespace

// Both passes (backward: sign -1, the rotation's transpose; the temperature is its own).
void CudaBackend::rope_run(const Tensor& in, const Tensor& out, const AttnDims& a, const RopeTable& r, float sign,
                           bool acc, const char* op) {
  check_dims(a, op);
  if (r.temp_floor <= 0) check_rope_table(a, r, op);
  check_float(in, op, sign > 0 ? "in" : "dout", qkv_numel(a));
  check_float(out, op, sign > 0 ? "out" : "din", qkv_numel(a));
  check_same(in, {&out}, op);
  activate();
  if (r.temp_floor > 0)
    return kernels::rope_temperature(ft(in), in.data, out.data, a.B, a.S, a.heads, a.kv_heads, a.d, a.v_dim(),
                                     r.temp_floor, r.temp_scale, acc, compute_);
  float* tab = reinterpret_cast<float*>(scratch(kernels::rope_scratch_bytes(a.S, a.d), op));
  kernels::rope_apply(ft(in), in.data, out.data, a.B, a.S, a.heads, a.kv_heads, a.d, a.v_dim(), r.rotary_dim,
                      r.inv_freq, r.attention_scaling, sign, acc, tab, compute_, r.interleaved);
}

void CudaBackend::rope_fwd(const Tensor& in, const Tensor& out, const AttnDims& a, const RopeTable& r) {
  rope_run(in, out, a, r, 1.0f, false, "rope_fwd");
}

void CudaBackend::rope_bwd(const Tensor& dout, const Tensor& din, const AttnDims& a,
                           const RopeTable& r, bool acc) {
  rope_run(dout, din, a, r, -1.0f, acc, "rope_bwd");
}

// --- embedding ---

void CudaBackend::embedding_fwd(const Tensor& tokens, const Tensor& wte, const Tensor* wpe,
                                const Tensor& out, int B, int S, int H, float scale) {
  const char* op = "embedding_fwd";
  if (B <= 0 || S <= 0 || H <= 0) throw Error("cuda embedding_fwd: bad shape");
  const std::int64_t rows = static_cast<std::int64_t>(B) * S;
  check_dtype(tokens, DType::I32, op, "tokens", rows);
  check_float(wte, op, "wte", H);
  const bool has_pe = wpe && *wpe;
  if (has_pe) check_float(*wpe, op, "wpe", static_cast<std::int64_t>(S) * H);
  check_float(out, op, "out", rows * H);
  check_same(wte, {has_pe ? wpe : nullptr, &out}, op);
  activate();
  kernels::embedding_fwd(ft(wte), tokens.as<const std::int32_t>(), wte.data,
                         has_pe ? wpe->data : nullptr, out.data, B, S, H, wte.numel / H, scale,
                         compute_);
}

void CudaBackend::embedding_bwd(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                                const Tensor* dwpe, int B, int S, int H, float scale) {
  const char* op = "embedding_bwd";
  if (B <= 0 || S <= 0 || H <= 0) throw Error("cuda embedding_bwd: bad shape");
  const std::int64_t rows = static_cast<std::int64_t>(B) * S;
  check_dtype(tokens, DType::I32, op, "tokens", rows);
  check_float(dout, op, "dout", rows * H);
  check_float(dwte, op, "dwte", H);
  const bool has_pe = dwpe && *dwpe;
  if (has_pe) check_float(*dwpe, op, "dwpe", static_cast<std::int64_t>(S) * H);
  check_same(dout, {&dwte, has_pe ? dwpe : nullptr}, op);
  activate();
  const std::size_t need = kernels::embedding_bwd_scratch_bytes(rows);
  char* ws = scratch(need, op);
  kernels::embedding_bwd(ft(dout), tokens.as<const std::int32_t>(), dout.data, dwte.data,
                         has_pe ? dwpe->data : nullptr, B, S, H, dwte.numel / H, scale, ws,
                         ws_bytes_, compute_);
}

// --- norms ---

void CudaBackend::layernorm_fwd(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                                std::int64_t rows, int H, float eps) {
  const char* op = "layernorm_fwd";
  if (rows <= 0 || H <= 0) throw Error("cuda layernorm_fwd: bad shape");
  check_float(x, op, "x", rows * H);
  check_float(w, op, "w", H);
  const bool has_b = static_cast<bool>(b);
  if (has_b) check_float(b, op, "b", H);
  check_float(y, op, "y", rows * H);
  check_same(x, {&w, has_b ? &b : nullptr, &y}, op);
  activate();
  kernels::layernorm_fwd(ft(x), x.data, w.data, has_b ? b.data : nullptr, y.data, rows, H, eps,
                         compute_);
}

void CudaBackend::layernorm_bwd(const Tensor& x, const Tensor& w, const Tensor& dy,
                                const Tensor& dx, const Tensor& dw, const Tensor& db,
                                std::int64_t rows, int H, float eps, bool acc) {
  const char* op = "layernorm_bwd";
  if (rows <= 0 || H <= 0) throw Error("cuda layernorm_bwd: bad shape");
  check_float(x, op, "x", rows * H);
  check_float(w, op, "w", H);
  check_float(dy, op, "dy", rows * H);
  check_float(dx, op, "dx", rows * H);
  check_float(dw, op, "dw", H);
  const bool has_db = static_cast<bool>(db);
  if (has_db) check_float(db, op, "db", H);
  check_same(x, {&w, &dy, &dx, &dw, has_db ? &db : nullptr}, op);
  activate();
  float* part = reinterpret_cast<float*>(scratch(kernels::norm_bwd_scratch_bytes(rows, H), op));
  kernels::layernorm_bwd(ft(x), x.data, w.data, dy.data, dx.data, dw.data,
                         has_db ? db.data : nullptr, rows, H, eps, acc, part, compute_);
}

void CudaBackend::rmsnorm_fwd(const Tensor& x, const Tensor& w, const Tensor& y, std::int64_t rows,
                              int H, float eps, float w_offset) {
  const char* op = "rmsnorm_fwd";
  if (rows <= 0 || H <= 0) throw Error("cuda rmsnorm_fwd: bad shape");
  check_float(x, op, "x", rows * H);
  check_float(w, op, "w", H);
  check_float(y, op, "y", rows * H);
  check_same(x, {&w, &y}, op);
  activate();
  kernels::rmsnorm_fwd(ft(x), x.data, w.data, y.data, rows, H, eps, w_offset, compute_);
}

void CudaBackend::rmsnorm_bwd(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& dx,
                              const Tensor& dw, std::int64_t rows, int H, float eps, bool acc,
                              float w_offset) {
  const char* op = "rmsnorm_bwd";
  if (rows <= 0 || H <= 0) throw Error("cuda rmsnorm_bwd: bad shape");
  check_float(x, op, "x", rows * H);
  check_float(w, op, "w", H);
  check_float(dy, op, "dy", rows * H);
  check_float(dx, op, "dx", rows * H);
  check_float(dw, op, "dw", H);
  check_same(x, {&w, &dy, &dx, &dw}, op);
  activate();
  float* part = reinterpret_cast<float*>(scratch(kernels::norm_bwd_scratch_bytes(rows, H), op));
  kernels::rmsnorm_bwd(ft(x), x.data, w.data, dy.data, dx.data, dw.data, rows, H, eps, w_offset,
                       acc, part, compute_);
}

// --- linear layers: row-major y[M,N] = x[M,K] W[N,K]^T is column-major y'[N,M] = W'^T x' ---

namespace {

void check_gemm_dims(std::int64_t M, int K, int N, const char* op) {
  if (M <= 0 || K <= 0 || N <= 0 || M > 0x7fffffff)
    throw Error(std::string("cuda ") + op + ": bad GEMM dims M=" + std::to_string(M) +
                " K=" + std::to_string(K) + " N=" + std::to_string(N));
}

}  // namespace

void CudaBackend::linear_fwd(const Tensor& x, const Tensor& W, const Tensor* b, const Tensor& y,
                             std::int64_t M, int K, int N) {
  const char* op = "linear_fwd";
  check_gemm_dims(M, K, N, op);
  check_float(x, op, "x", M * K);
  check_float(W, op, "W", static_cast<std::int64_t>(N) * K);
  check_float(y, op, "y", M * N);
  const bool has_b = b && *b;
  if (has_b) check_float(*b, op, "b", N);
  check_same(x, {&W, &y, has_b ? b : nullptr}, op);
  activate();
  gemm_->matmul(true, false, N, static_cast<int>(M), K, W.data, cdt(W), K, x.data, cdt(x), K,
                y.data, cdt(y), N, 1.0f, 0.0f, has_b ? b->data : nullptr, op);
}

void CudaBackend::linear_bwd(const Tensor& x, const Tensor& W, const Tensor& dy, const Tensor* dx,
                             const Tensor& dW, const Tensor* db, std::int64_t M, int K, int N,
                             bool acc) {
  const char* op = "linear_bwd";
  check_gemm_dims(M, K, N, op);
  const std::int64_t NK = static_cast<std::int64_t>(N) * K;
  check_float(x, op, "x", M * K);
  check_float(W, op, "W", NK);
  check_float(dy, op, "dy", M * N);
  check_float(dW, op, "dW", NK);
  const bool has_dx = dx && *dx, has_db = db && *db;
  if (has_dx) check_float(*dx, op, "dx", M * K);
  if (has_db) check_float(*db, op, "db", N);
  check_same(x, {&W, &dy, &dW, has_dx ? dx : nullptr, has_db ? db : nullptr}, op);
  activate();
  if (has_db) {
    float* part = reinterpret_cast<float*>(scratch(kernels::colsum_scratch_bytes(M, N), op));
    kernels::colsum(ft(dy), dy.data, ft(*db), db->data, M, N, true, part, compute_);
  }
  // dW'[K,N] += x'[K,M] dy'[N,M]^T
  gemm_->matmul(false, true, K, N, static_cast<int>(M), x.data, cdt(x), K, dy.data, cdt(dy), N,
                dW.data, cdt(dW), K, 1.0f, 1.0f, nullptr, op);
  // dx'[K,M] (+)= W'[K,N] dy'[N,M]
  if (has_dx)
    gemm_->matmul(false, false, K, static_cast<int>(M), N, W.data, cdt(W), K, dy.data, cdt(dy), N,
                  dx->data, cdt(*dx), K, 1.0f, acc ? 1.0f : 0.0f, nullptr, op);
}

// --- naive attention, one head at a time; batched over B with cublasGemmStridedBatchedEx ---
// (the probabilities of bf16 models with d in {32, 64, 128}: one fused kernel for all heads)

namespace {

// Head h's raw scores [B, S, S] in fp32: sc[b, i, j] = (q_i . k_j) * scale.
void head_scores(Gemm& gemm, const Tensor& qkv, const AttnDims& a, int h, float* sc,
                 const char* op) {
  const int S = a.S, d = a.d;
  const std::int64_t W = a.qkv_width();
  const std::size_t esz = qkv.dtype == DType::BF16 ? 2 : 4;
  const char* base = static_cast<const char*>(qkv.data);
  const char* Q = base + static_cast<std::size_t>(h) * d * esz;
  const char* K = base + static_cast<std::size_t>(a.heads + h / a.group()) * d * esz;
  // scores'[j, i] = K'^T Q' (scaled): m = S (keys), n = S (queries), k = d.
  gemm.batched(true, false, S, S, d, K, cdt(qkv), W, static_cast<std::int64_t>(S) * W, Q,
               cdt(qkv), W, static_cast<std::int64_t>(S) * W, sc, CUDA_R_32F, S,
               static_cast<std::int64_t>(S) * S, a.B, a.scale, 0.0f, op);
}

}  // namespace

void CudaBackend::attn_softmax_fwd(const Tensor& qkv, const Tensor& probs, const AttnDims& a,
                                   const Tensor* sinks) {
  const char* op = "attn_softmax_fwd";
  check_dims(a, op);
  check_float(qkv, op, "qkv", qkv_numel(a));
  check_float(probs, op, "probs", probs_numel(a));
  check_same(qkv, {&probs}, op);
  check_sinks(qkv, a, sinks, nullptr, false, op);
  activate();
  // The fused kernel has no sink column: with sinks, the per-head path.
  if (!sinks && fused_probs_ &&
      kernels::attn_probs_supported(ft(qkv), a.d, a.qkv_width(), qkv.data)) {
    kernels::attn_probs_fwd(ft(qkv), qkv.data, probs.data, a.B, a.S, a.heads, a.kv_heads, a.d,
                            a.v_dim(), a.scale, a.band(), a.softcap, compute_);
    return;
  }
  const int S = a.S;
  float* sc = reinterpret_cast<float*>(
      scratch(static_cast<std::size_t>(a.B) * S * S * 4, op));
  for (int h = 0; h < a.heads; ++h) {
    head_scores(*gemm_, qkv, a, h, sc, op);
    kernels::attn_softmax_fwd_head(ft(probs), sc, probs.data, a.B, S, a.heads, h, a.band(),
                                   a.softcap, sinks ? sinks->data : nullptr, compute_);
  }
}

void CudaBackend::attn_softmax_bwd(const Tensor& qkv, const Tensor& probs, const Tensor& dprobs,
                                   const Tensor& dqkv, const AttnDims& a, const Tensor* sinks,
                                   const Tensor* dsinks) {
  const char* op = "attn_softmax_bwd";
  check_dims(a, op);
  check_float(qkv, op, "qkv", qkv_numel(a));
  check_float(dqkv, op, "dqkv", qkv_numel(a));
  check_float(probs, op, "probs", probs_numel(a));
  check_float(dprobs, op, "dprobs", probs_numel(a));
  check_same(qkv, {&dqkv, &probs, &dprobs}, op);
  check_sinks(qkv, a, sinks, dsinks, true, op);
  activate();
  const int S = a.S, d = a.d, g = a.group();
  const std::int64_t W = a.qkv_width();
  const std::size_t esz = qkv.dtype == DType::BF16 ? 2 : 4;
  // dS of one head in the model dtype, then (soft-capped scores) the head's raw scores in fp32,
  // recomputed for the factor 1 - t^2. Sinks: each head's sink gradient last, from the scores
  // (uncapped: recomputed over dS, spent by then), so no more scratch than the forward's.
  const std::size_t ds_bytes = align256(static_cast<std::size_t>(a.B) * S * S * esz);
  const std::size_t sc_bytes = static_cast<std::size_t>(a.B) * S * S * 4;
  const bool capped = a.softcap > 0.0f;
  char* ds = scratch(std::max(ds_bytes + (capped ? sc_bytes : 0), sinks ? sc_bytes : 0), op);
  float* sc = capped ? reinterpret_cast<float*>(ds + ds_bytes) : nullptr;
  const char* in = static_cast<const char*>(qkv.data);
  char* out = static_cast<char*>(dqkv.data);
  const std::int64_t sW = static_cast<std::int64_t>(S) * W, sSS = static_cast<std::int64_t>(S) * S;
  for (int h = 0; h < a.heads; ++h) {
    if (capped) head_scores(*gemm_, qkv, a, h, sc, op);
    kernels::attn_softmax_bwd_head(ft(qkv), probs.data, dprobs.data, sc, ds, a.B, S, a.heads, h,
                                   a.band(), a.softcap, compute_);
    const std::size_t qoff = static_cast<std::size_t>(h) * d * esz;
    const std::size_t koff = static_cast<std::size_t>(a.heads + h / g) * d * esz;
    // dQ'[d, i] += scale K'[d, j] dS'[j, i]
    gemm_->batched(false, false, d, S, S, in + koff, cdt(qkv), W, sW, ds, cdt(qkv), S, sSS,
                   out + qoff, cdt(dqkv), W, sW, a.B, a.scale, 1.0f, op);
    // dK'[d, j] += scale Q'[d, i] dS'[j, i]^T
    gemm_->batched(false, true, d, S, S, in + qoff, cdt(qkv), W, sW, ds, cdt(qkv), S, sSS,
                   out + koff, cdt(dqkv), W, sW, a.B, a.scale, 1.0f, op);
    if (!sinks) continue;
    float* ssc = capped ? sc : reinterpret_cast<float*>(ds);
    if (!capped) head_scores(*gemm_, qkv, a, h, ssc, op);
    kernels::attn_sink_grad_head(ft(qkv), probs.data, dprobs.data, ssc, sinks->data, dsinks->data,
                                 a.B, S, a.heads, h, a.band(), a.softcap, compute_);
  }
}

void CudaBackend::attn_pv_fwd(const Tensor& p, const Tensor& qkv, const Tensor& ctx,
                              const AttnDims& a) {
  const char* op = "attn_pv_fwd";
  check_dims(a, op);
  check_float(qkv, op, "qkv", qkv_numel(a));
  check_float(p, op, "p", probs_numel(a));
  check_float(ctx, op, "ctx", ctx_numel(a));
  check_same(qkv, {&p, &ctx}, op);
  activate();
  const int S = a.S, dv = a.v_dim(), g = a.group();
  const std::int64_t W = a.qkv_width(), Hc = a.ctx_width();
  const std::size_t esz = qkv.dtype == DType::BF16 ? 2 : 4;
  const char* in = static_cast<const char*>(qkv.data);
  const char* P = static_cast<const char*>(p.data);
  char* out = static_cast<char*>(ctx.data);
  const std::int64_t sSS = static_cast<std::int64_t>(S) * S;
  for (int h = 0; h < a.heads; ++h) {
    const std::size_t voff = v_col(a, h / g) * esz;
    // ctx'[dv, i] = V'[dv, j] P'[j, i]
    gemm_->batched(false, false, dv, S, S, in + voff, cdt(qkv), W,
                   static_cast<std::int64_t>(S) * W,
                   P + static_cast<std::size_t>(h) * sSS * esz, cdt(p), S,
                   static_cast<std::int64_t>(a.heads) * sSS,
                   out + static_cast<std::size_t>(h) * dv * esz, cdt(ctx), Hc,
                   static_cast<std::int64_t>(S) * Hc, a.B, 1.0f, 0.0f, op);
  }
}

void CudaBackend::attn_pv_bwd(const Tensor& p, const Tensor& qkv, const Tensor& dctx,
                              const Tensor& dp, const Tensor& dqkv, const AttnDims& a,
                              bool acc_dp) {
  const char* op = "attn_pv_bwd";
  check_dims(a, op);
  check_float(qkv, op, "qkv", qkv_numel(a));
  check_float(dqkv, op, "dqkv", qkv_numel(a));
  check_float(p, op, "p", probs_numel(a));
  check_float(dp, op, "dp", probs_numel(a));
  check_float(dctx, op, "dctx", ctx_numel(a));
  check_same(qkv, {&dqkv, &p, &dp, &dctx}, op);
  activate();
  const int S = a.S, dv = a.v_dim(), g = a.group();
  const std::int64_t W = a.qkv_width(), Hc = a.ctx_width();
  const std::size_t esz = qkv.dtype == DType::BF16 ? 2 : 4;
  float* tmp = reinterpret_cast<float*>(scratch(static_cast<std::size_t>(a.B) * S * S * 4, op));
  const char* in = static_cast<const char*>(qkv.data);
  const char* P = static_cast<const char*>(p.data);
  const char* dO = static_cast<const char*>(dctx.data);
  char* DP = static_cast<char*>(dp.data);
  char* out = static_cast<char*>(dqkv.data);
  const std::int64_t sSS = static_cast<std::int64_t>(S) * S;
  for (int h = 0; h < a.heads; ++h) {
    const std::size_t voff = v_col(a, h / g) * esz;
    const char* dOh = dO + static_cast<std::size_t>(h) * dv * esz;
    if (acc_dp) {
      // dP'[j, i] = V'[dv, j]^T dctx'[dv, i] (fp32), then added in the band.
      gemm_->batched(true, false, S, S, dv, in + voff, cdt(qkv), W,
                     static_cast<std::int64_t>(S) * W, dOh, cdt(dctx), Hc,
                     static_cast<std::int64_t>(S) * Hc, tmp, CUDA_R_32F, S, sSS, a.B, 1.0f, 0.0f,
                     op);
      kernels::attn_band_store_head(ft(dp), tmp, dp.data, a.B, S, a.heads, h, a.band(), true,
                                    compute_);
    } else {
      // Straight into dp's head slice (rounded once, as the store would), then the zeros
      // outside the band: no fp32 round trip through the scratch.
      gemm_->batched(true, false, S, S, dv, in + voff, cdt(qkv), W,
                     static_cast<std::int64_t>(S) * W, dOh, cdt(dctx), Hc,
                     static_cast<std::int64_t>(S) * Hc, DP + static_cast<std::size_t>(h) * sSS * esz,
                     cdt(dp), S, static_cast<std::int64_t>(a.heads) * sSS, a.B, 1.0f, 0.0f, op);
      kernels::attn_zero_outside_band_head(ft(dp), dp.data, a.B, S, a.heads, h, a.band(),
                                           compute_);
    }
    // dV'[dv, j] += dctx'[dv, i] P'[j, i]^T
    gemm_->batched(false, true, dv, S, S, dOh, cdt(dctx), Hc, static_cast<std::int64_t>(S) * Hc,
                   P + static_cast<std::size_t>(h) * sSS * esz, cdt(p), S,
                   static_cast<std::int64_t>(a.heads) * sSS, out + voff, cdt(dqkv), W,
                   static_cast<std::int64_t>(S) * W, a.B, 1.0f, 1.0f, op);
  }
}

// --- flash attention ---

namespace {

// The checks and kernel arguments the forward and the backward share.
kernels::FlashArgs flash_args(const Tensor& qkv, const Tensor& ctx, const Tensor& lse,
                              const AttnDims& a, const DropoutKey& key, float p, int row_groups,
                              const char* op, const Tensor* sinks) {
  check_dims(a, op);
  check_p(p, op);
  check_float(qkv, op, "qkv", qkv_numel(a));
  check_float(ctx, op, "ctx", ctx_numel(a));
  check_dtype(lse, DType::F32, op, "lse", static_cast<std::int64_t>(a.B) * a.heads * a.S);
  kernels::FlashArgs fa;
  fa.qkv = qkv.data;
  fa.ctx = ctx.data;
  fa.lse = lse.as<float>();
  fa.B = a.B;
  fa.S = a.S;
  fa.heads = a.heads;
  fa.kv_heads = a.kv_heads;
  fa.d = a.d;
  fa.dv = a.v_dim();
  fa.scale = a.scale;
  fa.window = a.band();
  fa.softcap = a.softcap;
  fa.key = key;
  fa.p = p;
  fa.row_groups = row_groups;
  fa.sinks = sinks ? sinks->data : nullptr;
  return fa;
}

}  // namespace

void CudaBackend::flash_fwd(const Tensor& qkv, const Tensor& ctx, const Tensor& lse,
                            const AttnDims& a, const DropoutKey& key, float p,
                            const Tensor* sinks) {
  const char* op = "flash_fwd";
  const kernels::FlashArgs fa = flash_args(qkv, ctx, lse, a, key, p, flash_row_groups_, op, sinks);
  check_same(qkv, {&ctx}, op);
  check_sinks(qkv, a, sinks, nullptr, false, op);
  activate();
  kernels::flash_fwd(ft(qkv), fa, flash_impl_, compute_);
}

void CudaBackend::flash_bwd(const Tensor& qkv, const Tensor& ctx, const Tensor& lse,
                            const Tensor& dctx, const Tensor& dqkv, const AttnDims& a,
                            const DropoutKey& key, float p, const Tensor* sinks,
                            const Tensor* dsinks) {
  const char* op = "flash_bwd";
  kernels::FlashArgs fa = flash_args(qkv, ctx, lse, a, key, p, flash_row_groups_, op, sinks);
  check_float(dctx, op, "dctx", ctx_numel(a));
  check_float(dqkv, op, "dqkv", qkv_numel(a));
  check_same(qkv, {&ctx, &dctx, &dqkv}, op);
  check_sinks(qkv, a, sinks, dsinks, true, op);
  fa.dsinks = dsinks ? dsinks->data : nullptr;
  activate();
  fa.dctx = dctx.data;
  fa.dqkv = dqkv.data;
  fa.scratch = reinterpret_cast<float*>(
      scratch(kernels::flash_bwd_scratch_bytes(a.B, a.heads, a.S), op));
  kernels::flash_bwd(ft(qkv), fa, flash_impl_, compute_);
}

// --- head and loss: logits in row chunks of fp32, never all at once ---

void CudaBackend::head_loss(const Tensor& x, const Tensor& W, const Tensor& targets,
                            const Tensor& losses, const Tensor& dx, const Tensor& dW,
                            std::int64_t rows, int H, int V, float scale, float softcap,
                            float logit_mult) {
  const char* op = "head_loss";
  check_gemm_dims(rows, H, V, op);
  if (!(softcap >= 0.0f) || !std::isfinite(softcap))
    throw Error("cuda head_loss: softcap must be 0 (none) or positive, got " +
                std::to_string(softcap));
  if (!(logit_mult > 0.0f) || !std::isfinite(logit_mult))
    throw Error("cuda head_loss: the logits' multiplier must be positive, got " +
                std::to_string(logit_mult));
  const std::int64_t VH = static_cast<std::int64_t>(V) * H;
  check_float(x, op, "x", rows * H);
  check_float(W, op, "W", VH);
  check_dtype(targets, DType::I32, op, "targets", rows);
  check_dtype(losses, DType::F32, op, "losses", rows);
  check_float(dx, op, "dx", rows * H);
  check_float(dW, op, "dW", VH);
  check_same(x, {&W, &dx, &dW}, op);
  activate();
  const std::int64_t chunk = head_chunk_rows(rows, V, head_chunk_bytes_);
  const std::size_t n = static_cast<std::size_t>(chunk) * V;
  const std::size_t esz = x.dtype == DType::BF16 ? 2 : 4;
  char* ws = scratch(align256(n * 4) + align256(n * esz), op);
  float* logits = reinterpret_cast<float*>(ws);
  void* dlogits = ws + align256(n * 4);
  const FType t = ft(x);
  const char* xb = static_cast<const char*>(x.data);
  char* dxb = static_cast<char*>(dx.data);
  for (std::int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int c = static_cast<int>(std::min(chunk, rows - r0));
    const char* xc = xb + static_cast<std::size_t>(r0) * H * esz;
    // logits'[V, c] = logit_mult W'[H, V]^T x'[H, c]
    gemm_->matmul(true, false, V, c, H, W.data, cdt(W), H, xc, cdt(x), H, logits, CUDA_R_32F, V,
                  logit_mult, 0.0f, nullptr, op);
    // dlogits with respect to W'^T x': logit_mult times the logits'.
    kernels::cross_entropy_rows(t, logits, targets.as<const std::int32_t>() + r0,
                                losses.as<float>() + r0, dlogits, c, V, scale * logit_mult, softcap,
                                compute_);
    // dx'[H, c] = W'[H, V] dlogits'[V, c]
    gemm_->matmul(false, false, H, c, V, W.data, cdt(W), H, dlogits, cdt(t), V,
                  dxb + static_cast<std::size_t>(r0) * H * esz, cdt(dx), H, 1.0f, 0.0f, nullptr,
                  op);
    // dW'[H, V] += x'[H, c] dlogits'[V, c]^T
    gemm_->matmul(false, true, H, V, c, xc, cdt(x), H, dlogits, cdt(t), V, dW.data, cdt(dW), H,
                  1.0f, 1.0f, nullptr, op);
  }
}

// --- optimizer ---

void CudaBackend::adamw(const Tensor& params, const Tensor& grads, const Tensor* master,
                        const Tensor& m, const Tensor& v, const std::vector<AdamSegment>& segs,
                        const AdamArgs& args) {
  const char* op = "adamw";
  std::int64_t end = 0;
  for (const AdamSegment& s : segs) {
    if (s.offset < 0 || s.numel < 0)
      throw Error("cuda adamw: segment at " + std::to_string(s.offset) + " of " +
                  std::to_string(s.numel) + " elements is invalid");
    end = std::max(end, s.offset + s.numel);
  }
  check_float(params, op, "params", end);
  check_float(grads, op, "grads", end);
  check_same(params, {&grads}, op);
  check_dtype(m, DType::F32, op, "m", end);
  check_dtype(v, DType::F32, op, "v", end);
  const bool has_master = master && *master;
  if (has_master) check_dtype(*master, DType::F32, op, "master", end);
  else if (params.dtype != DType::F32)
    throw Error("cuda adamw: bf16 parameters need an fp32 master");
  if (args.t < 1) throw Error("cuda adamw: step count t must be >= 1");
  activate();
  // The same scalars as the CPU backend, computed the same way.
  const double bc1 = 1.0 - std::pow(static_cast<double>(args.beta1), args.t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(args.beta2), args.t);
  kernels::AdamwScalars k;
  k.step_size = static_cast<float>(static_cast<double>(args.lr) / bc1);
  k.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  k.decay = static_cast<float>(1.0 - static_cast<double>(args.lr) * args.weight_decay);
  k.w1 = 1.0f - args.beta1;
  k.b2 = args.beta2;
  k.w2 = 1.0f - args.beta2;
  k.eps = args.eps;
  std::vector<kernels::AdamwSeg> ks;
  ks.reserve(segs.size());
  for (const AdamSegment& s : segs) ks.push_back({s.offset, s.numel, s.decay});
  kernels::adamw(ft(params), params.data, grads.data, has_master ? master->as<float>() : nullptr,
                 m.as<float>(), v.as<float>(), ks, k, compute_, args.zero_moments);
}

}  // namespace remat::cuda
