// The mixture-of-experts ops, all of their CUDA side (the CPU twins: core/backend/cpu/cpu_moe.cpp,
// whose comments give the routing table's layout): the router's top-k on the device, each
// choice's row on the host with the CPU's very code (core/backend/moe_rows.h, after one copy of
// the choices), permute and unpermute as element-wise kernels, and the experts' projections as
// one GEMM per expert over its rows (their counts read back once per op); the shared experts'
// sigmoid gate.
#include <algorithm>
#include <vector>

#include "core/backend/cuda/cuda_args.h"
#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/expert_linear.h"
#include "core/backend/moe_aux.h"
#include "core/backend/moe_rows.h"
#include "kernels/detail/device_utils.cuh"

namespace remat::kernels {
namespace {

using detail::bf16;
using detail::from_f;
using detail::to_f;

constexpr int kThreads = 256;

int blocks_for(std::int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

// Per-thread rows of the router: the chosen experts and their weights (top_k at most kMaxTopK);
// the scores are computed on the fly from the logits (core/backend/moe_score.h).
constexpr int kMaxTopK = 64;

// One thread per token: the router's arithmetic on its logits.
template <class T>
__global__ void route_fwd(const T* logits, const T* bias, T* w, float* w32, std::int32_t* expert, std::int64_t tokens,
                          MoeRouter r) {
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (t >= tokens) return;
  const int E = r.experts, k = r.top_k;
  const T* l = logits + t * E;
  const MoeScores score([l](int e) { return to_f(l[e]); }, r);
  int chosen[kMaxTopK];
  float wk[kMaxTopK];
  moe_choose(r, score, [bias](int e) { return bias ? to_f(bias[e]) : 0.0f; }, chosen, wk);
  for (int j = 0; j < k; ++j) {
    expert[t * k + j] = chosen[j];
    w32[t * k + j] = wk[j];
    w[t * k + j] = from_f<T>(wk[j]);
  }
}

// The load-balancing loss's statistics of one layer (core/backend/moe_aux.h), one block of kThreads
// per expert: its choices and the sum of its probability over the tokens, each thread's tokens in
// order (double), then a fixed tree over the threads, so the bits repeat.
template <class T>
__global__ void route_stats(const T* logits, const std::int32_t* expert, std::int64_t tokens, MoeRouter r,
                            float* stats) {
  __shared__ double sum[kThreads], count[kThreads];
  const int e = blockIdx.x, E = r.experts;
  double s = 0.0, c = 0.0;
  for (std::int64_t t = threadIdx.x; t < tokens; t += kThreads) {
    const T* l = logits + t * E;
    const MoeScores score([l](int x) { return to_f(l[x]); }, r);
    s += score(e);
  }
  for (std::int64_t i = threadIdx.x; i < tokens * r.top_k; i += kThreads) c += expert[i] == e ? 1.0 : 0.0;
  s = detail::block_sum_fixed<kThreads>(s, sum);
  c = detail::block_sum_fixed<kThreads>(c, count);
  if (threadIdx.x == 0) {
    stats[e] = static_cast<float>(c);
    stats[E + e] = static_cast<float>(s);
  }
}

// The loss and its gradient from every layer's statistics: one thread, the host's very loop.
__global__ void aux_loss(MoeAuxLayout L, float* p, std::int64_t tokens, double coef, double grad_scale) {
  moe_aux_loss_of(L, p, tokens, coef, grad_scale, p + L.grad(), p + L.loss());
}

template <class T>
__global__ void route_bwd(const T* logits, const T* dw, T* dl, const std::int32_t* expert, std::int64_t tokens, MoeRouter r,
                          bool acc, const float* aux) {
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (t >= tokens) return;
  const int E = r.experts, k = r.top_k;
  const T* l = logits + t * E;
  const MoeScores score([l](int e) { return to_f(l[e]); }, r);
  int chosen[kMaxTopK];
  float dwk[kMaxTopK], ds[kMaxTopK];
  for (int j = 0; j < k; ++j) {
    dwk[j] = to_f(dw[t * k + j]);
    chosen[j] = expert[t * k + j];
  }
  T* out = dl + t * E;
  moe_score_grad(r, score, chosen, dwk, ds,
                 [out, acc](int e, float g) { out[e] = from_f<T>(acc ? to_f(out[e]) + g : g); }, aux);
}

// w: the weights scaling the rows (MoeDims::weight_input), null: a copy.
template <class T>
__global__ void permute_fwd(const T* x, const T* w, T* xp, const std::int32_t* row, std::int64_t n, int k, int H) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n * H) return;
  const std::int64_t a = i / H, h = i % H;
  if (row[a] < 0) return;
  const std::int64_t o = static_cast<std::int64_t>(row[a]) * H + h;
  xp[o] = w ? from_f<T>(to_f(x[(a / k) * H + h]) * to_f(w[a])) : x[(a / k) * H + h];
}

template <class T>
__global__ void permute_bwd(const T* dxp, const T* w, T* dx, const std::int32_t* row, std::int64_t tokens, int k, int H,
                            bool acc) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= tokens * H) return;
  const std::int64_t t = i / H, h = i % H;
  float s = 0.0f;
  for (int j = 0; j < k; ++j)
    if (const std::int32_t r = row[t * k + j]; r >= 0) {
      const float g = to_f(dxp[static_cast<std::int64_t>(r) * H + h]);
      s += w ? to_f(w[t * k + j]) * g : g;
    }
  dx[i] = from_f<T>(acc ? to_f(dx[i]) + s : s);
}

template <class T>
__global__ void unpermute_fwd(const T* yp, const T* w, const T* shared, T* y, const std::int32_t* row, std::int64_t tokens,
                              int k, int H) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= tokens * H) return;
  const std::int64_t t = i / H, h = i % H;
  float s = 0.0f;
  for (int j = 0; j < k; ++j)
    if (const std::int32_t r = row[t * k + j]; r >= 0) {
      const float y_r = to_f(yp[static_cast<std::int64_t>(r) * H + h]);
      s += w ? to_f(w[t * k + j]) * y_r : y_r;  // w null: the weights went into the rows
    }
  y[i] = from_f<T>(shared ? s + to_f(shared[i]) : s);
}

template <class T>
__global__ void copy_acc(const T* src, T* dst, std::int64_t n, bool acc) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) dst[i] = from_f<T>(acc ? to_f(dst[i]) + to_f(src[i]) : to_f(src[i]));
}

template <class T>
__global__ void sigmoid_gate_fwd(const T* x, const T* g, T* y, std::int64_t M, int K) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= M * K) return;
  const float s = 1.0f / (1.0f + expf(-to_f(g[i / K])));
  y[i] = from_f<T>(s * to_f(x[i]));
}

// One thread per row: dx over the row, dg from the row's dot product.
template <class T>
__global__ void sigmoid_gate_bwd(const T* x, const T* g, const T* dy, T* dx, T* dg, std::int64_t M, int K, bool acc_x,
                                 bool acc_g) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (r >= M) return;
  const float s = 1.0f / (1.0f + expf(-to_f(g[r])));
  float dot = 0.0f;
  for (int c = 0; c < K; ++c) {
    const std::int64_t i = r * K + c;
    dot += to_f(dy[i]) * to_f(x[i]);
    if (dx) dx[i] = from_f<T>(acc_x ? to_f(dx[i]) + s * to_f(dy[i]) : s * to_f(dy[i]));
  }
  if (dg) dg[r] = from_f<T>(acc_g ? to_f(dg[r]) + dot * s * (1.0f - s) : dot * s * (1.0f - s));
}

template <class T>
__global__ void unpermute_bwd_rows(const T* w, const T* dy, T* dyp, const std::int32_t* row, std::int64_t n, int k, int H,
                                   bool acc) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n * H) return;
  const std::int64_t a = i / H, h = i % H;
  if (row[a] < 0) return;
  const std::int64_t o = static_cast<std::int64_t>(row[a]) * H + h;
  const float g = w ? to_f(w[a]) * to_f(dy[(a / k) * H + h]) : to_f(dy[(a / k) * H + h]);
  dyp[o] = from_f<T>(acc ? to_f(dyp[o]) + g : g);
}

// Per (token, choice): dy of the token · yp of its row (0 where dropped). MoePermute's dweights
// under weight_input are the same product with x for dy and the rows' gradient for yp.
template <class T>
__global__ void unpermute_bwd_weights(const T* yp, const T* dy, T* dw, const std::int32_t* row, std::int64_t n, int k, int H,
                                      bool acc) {
  const std::int64_t a = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (a >= n) return;
  float s = 0.0f;
  if (row[a] >= 0)
    for (int h = 0; h < H; ++h) s += to_f(dy[(a / k) * H + h]) * to_f(yp[static_cast<std::int64_t>(row[a]) * H + h]);
  dw[a] = from_f<T>(acc ? to_f(dw[a]) + s : s);
}

}  // namespace
}  // namespace remat::kernels

// Launches kernel<float> or kernel<bf16> by the storage type; the arguments may name T.
#define REMAT_MOE_LAUNCH(kernel, type, n, ...)                                                         \
  do {                                                                                               \
    if ((type) == kernels::FType::BF16) {                                                            \
      using T = bf16;                                                                                \
      kernel<T><<<kernels::blocks_for(n), kernels::kThreads, 0, stream>>>(__VA_ARGS__);               \
    } else {                                                                                         \
      using T = float;                                                                               \
      kernel<T><<<kernels::blocks_for(n), kernels::kThreads, 0, stream>>>(__VA_ARGS__);               \
    }                                                                                                \
    kernels::check_launch(#kernel);                                                                  \
  } while (0)

namespace remat::cuda {

namespace {

void check_moe(const MoeDims& d, const char* op) { check_moe_dims(d, "cuda", op); }

// The router's chosen experts live in per-thread arrays of kernels::kMaxTopK; groups in a 64-bit mask.
void check_router(const MoeDims& d, const char* op) {
  if (d.top_k > kernels::kMaxTopK || d.groups > 64)
    throw Error(std::string("cuda ") + op + ": the router takes at most top " + std::to_string(kernels::kMaxTopK) +
                " and 64 groups (top_k " + std::to_string(d.top_k) + ", groups " + std::to_string(d.groups) + ")");
}

void check_routing(const Tensor& r, const MoeDims& d, const char* op) {
  check_dtype(r, DType::I32, op, "routing", MoeTable(d).entries);
}

// The routing table's rows part (moe_rows.h MoeTable).
const std::int32_t* rows_of(const Tensor& r, const MoeDims& d) { return r.as<const std::int32_t>() + MoeTable(d).row; }

template <class T>
const T* cp(const Tensor& t) { return static_cast<const T*>(t.data); }

}  // namespace

using kernels::detail::bf16;

void CudaBackend::fwd_MoeRoute(const OpArgs& a) {
  const char* op = "moe_route_fwd";
  const MoeDims& d = a.moe;
  check_moe(d, op);
  const std::int64_t n = d.tokens * d.top_k;
  check_float(*a.in[0], op, "logits", d.tokens * d.experts);
  check_float(*a.out[0], op, "weights", n);
  check_routing(*a.out[1], d, op);
  const bool has_bias = a.b && *a.b;
  if (has_bias) check_float(*a.b, op, "bias", d.experts);
  check_same(*a.in[0], {a.out[0], has_bias ? a.b : nullptr}, op);
  check_router(d, op);
  activate();
  float* w32 = reinterpret_cast<float*>(scratch(static_cast<std::size_t>(n) * 4, op));
  auto* expert = a.out[1]->as<std::int32_t>();
  cudaStream_t stream = compute_;
  REMAT_MOE_LAUNCH(kernels::route_fwd, ft(*a.in[0]), d.tokens, cp<T>(*a.in[0]), has_bias ? cp<T>(*a.b) : nullptr,
                   static_cast<T*>(a.out[0]->data), w32, expert, d.tokens, moe_router(d));
  if (a.aux) {  // the load-balancing loss's statistics, one block per expert
    check_dtype(*a.aux, DType::F32, op, "load-balancing statistics", 2 * static_cast<std::int64_t>(d.experts));
    if (d.sigmoid) throw Error(std::string("cuda ") + op + ": the load-balancing loss takes a softmax router");
    float* stats = a.aux->as<float>();
    if (ft(*a.in[0]) == kernels::FType::BF16)
      kernels::route_stats<bf16><<<d.experts, kernels::kThreads, 0, stream>>>(cp<bf16>(*a.in[0]), expert, d.tokens,
                                                                               moe_router(d), stats);
    else
      kernels::route_stats<float><<<d.experts, kernels::kThreads, 0, stream>>>(cp<float>(*a.in[0]), expert, d.tokens,
                                                                                moe_router(d), stats);
    kernels::check_launch("route_stats");
  }
  // The rows, on the host with the CPU backend's code.
  const MoeTable tb(d);
  std::vector<std::int32_t> table(static_cast<std::size_t>(tb.entries));
  std::vector<float> w(static_cast<std::size_t>(n));
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n)), off(static_cast<std::size_t>(d.experts) + 1);
  REMAT_CUDA(cudaMemcpyAsync(table.data(), expert, static_cast<std::size_t>(n) * 4, cudaMemcpyDeviceToHost, stream));
  REMAT_CUDA(cudaMemcpyAsync(w.data(), w32, static_cast<std::size_t>(n) * 4, cudaMemcpyDeviceToHost, stream));
  REMAT_CUDA(cudaStreamSynchronize(stream));
  std::int32_t* t = table.data();
  moe_assign_rows(d, t, w.data(), t + tb.row, t + tb.start, t + tb.count, ids.data(), off.data());
  REMAT_CUDA(cudaMemcpyAsync(expert + tb.row, t + tb.row, static_cast<std::size_t>(tb.entries - tb.row) * 4,
                             cudaMemcpyHostToDevice, stream));
  REMAT_CUDA(cudaStreamSynchronize(stream));  // the host table goes out of scope
}

void CudaBackend::bwd_MoeRoute(const OpArgs& a) {
  const char* op = "moe_route_bwd";
  const MoeDims& d = a.moe;
  check_moe(d, op);
  if (!a.din[0]) return;
  check_float(*a.in[0], op, "logits", d.tokens * d.experts);
  check_float(*a.dout[0], op, "dweights", d.tokens * d.top_k);
  check_float(*a.din[0], op, "dlogits", d.tokens * d.experts);
  check_same(*a.in[0], {a.dout[0], a.din[0]}, op);
  check_routing(*a.out[1], d, op);
  activate();
  cudaStream_t stream = compute_;
  check_router(d, op);
  if (a.aux) check_dtype(*a.aux, DType::F32, op, "load-balancing gradient", d.experts);
  const float* aux = a.aux ? a.aux->as<const float>() : nullptr;
  REMAT_MOE_LAUNCH(kernels::route_bwd, ft(*a.in[0]), d.tokens, cp<T>(*a.in[0]), cp<T>(*a.dout[0]),
                   static_cast<T*>(a.din[0]->data), a.out[1]->as<const std::int32_t>(), d.tokens, moe_router(d), a.acc[0],
                   aux);
}

void CudaBackend::moe_aux_loss(const Tensor& aux, int layers, int experts, std::int64_t tokens, double coef,
                               double grad_scale) {
  const MoeAuxLayout L{layers, experts};
  check_dtype(aux, DType::F32, "moe_aux_loss", "buffer", L.size());
  activate();
  kernels::aux_loss<<<1, 1, 0, compute_>>>(L, aux.as<float>(), tokens, coef, grad_scale);
  kernels::check_launch("aux_loss");
}

void CudaBackend::fwd_MoePermute(const OpArgs& a) {
  const char* op = "moe_permute_fwd";
  const MoeDims& d = a.moe;
  check_moe(d, op);
  const int H = a.K;
  check_float(*a.in[0], op, "x", d.tokens * H);
  check_float(*a.out[0], op, "xp", d.rows() * H);
  check_same(*a.in[0], {a.out[0]}, op);
  check_routing(*a.in[1], d, op);
  const std::int64_t n = d.tokens * d.top_k;
  if (d.weight_input) {
    check_float(*a.in[2], op, "weights", n);
    check_same(*a.in[0], {a.in[2]}, op);
  }
  activate();
  cudaStream_t stream = compute_;
  if (d.capacity > 0) REMAT_CUDA(cudaMemsetAsync(a.out[0]->data, 0, a.out[0]->bytes(), stream));
  REMAT_MOE_LAUNCH(kernels::permute_fwd, ft(*a.in[0]), n * H, cp<T>(*a.in[0]), d.weight_input ? cp<T>(*a.in[2]) : nullptr,
                   static_cast<T*>(a.out[0]->data), rows_of(*a.in[1], d), n, d.top_k, H);
}

void CudaBackend::bwd_MoePermute(const OpArgs& a) {
  const char* op = "moe_permute_bwd";
  const MoeDims& d = a.moe;
  check_moe(d, op);
  const int H = a.K;
  const std::int64_t n = d.tokens * d.top_k;
  check_float(*a.dout[0], op, "dxp", d.rows() * H);
  check_routing(*a.in[1], d, op);
  if (d.weight_input) {
    check_float(*a.in[0], op, "x", d.tokens * H);
    check_float(*a.in[2], op, "weights", n);
    check_same(*a.dout[0], {a.in[0], a.in[2]}, op);
  }
  activate();
  cudaStream_t stream = compute_;
  const std::int32_t* row = rows_of(*a.in[1], d);
  if (a.din[0] && *a.din[0]) {
    check_float(*a.din[0], op, "dx", d.tokens * H);
    check_same(*a.dout[0], {a.din[0]}, op);
    REMAT_MOE_LAUNCH(kernels::permute_bwd, ft(*a.dout[0]), d.tokens * H, cp<T>(*a.dout[0]),
                     d.weight_input ? cp<T>(*a.in[2]) : nullptr, static_cast<T*>(a.din[0]->data), row, d.tokens, d.top_k,
                     H, a.acc[0]);
  }
  if (d.weight_input && a.din[2] && *a.din[2]) {  // d row · x
    check_float(*a.din[2], op, "dweights", n);
    REMAT_MOE_LAUNCH(kernels::unpermute_bwd_weights, ft(*a.dout[0]), n, cp<T>(*a.dout[0]), cp<T>(*a.in[0]),
                     static_cast<T*>(a.din[2]->data), row, n, d.top_k, H, a.acc[2]);
  }
}

namespace {

// Each expert's first row and row count, read back (the routing table's last part, MoeTable).
std::vector<std::int32_t> expert_rows(const Tensor& routing, const MoeDims& d, cudaStream_t stream) {
  std::vector<std::int32_t> sc(static_cast<std::size_t>(2 * d.experts));
  REMAT_CUDA(cudaMemcpyAsync(sc.data(), routing.as<const std::int32_t>() + MoeTable(d).start, sc.size() * 4,
                             cudaMemcpyDeviceToHost, stream));
  REMAT_CUDA(cudaStreamSynchronize(stream));
  return sc;
}

}  // namespace

// Both passes: the checks once, the experts' row counts read back, one Linear per expert
// (core/backend/expert_linear.h).
void CudaBackend::expert_linear(const OpArgs& a, Pass pass) {
  const bool bwd = pass == Pass::Backward;
  const char* op = bwd ? "expert_linear_bwd" : "expert_linear_fwd";
  const MoeDims& d = a.moe;
  check_moe(d, op);
  const int K = a.K, N = a.N;
  const std::int64_t NK = static_cast<std::int64_t>(N) * K;
  check_float(*a.in[0], op, "x", a.M * K);
  check_float(bwd ? *a.dout[0] : *a.out[0], op, bwd ? "dy" : "y", a.M * N);
  check_float(bwd ? *a.dw : *a.w, op, bwd ? "dW" : "W", NK * d.experts);
  if (const Tensor* b = bwd ? a.db : a.b) check_float(*b, op, bwd ? "dB" : "B", static_cast<std::int64_t>(N) * d.experts);
  check_routing(*a.in[1], d, op);
  activate();
  const auto sc = expert_rows(*a.in[1], d, compute_);
  run_expert_linears(
      *this, a, pass, [&](int e) { return sc[static_cast<std::size_t>(e)]; },
      [&](int e) { return moe_expert_rows(d, sc[static_cast<std::size_t>(d.experts + e)]); });
}

void CudaBackend::fwd_ExpertLinear(const OpArgs& a) { expert_linear(a, Pass::Forward); }
void CudaBackend::bwd_ExpertLinear(const OpArgs& a) { expert_linear(a, Pass::Backward); }

void CudaBackend::fwd_MoeUnpermute(const OpArgs& a) {
  const char* op = "moe_unpermute_fwd";
  const MoeDims& d = a.moe;
  check_moe(d, op);
  const int H = a.K;
  check_float(*a.in[0], op, "yp", d.rows() * H);
  check_float(*a.in[1], op, "weights", d.tokens * d.top_k);
  check_float(*a.out[0], op, "y", d.tokens * H);
  const bool shared = a.in[3] && *a.in[3];
  if (shared) check_float(*a.in[3], op, "shared", d.tokens * H);
  check_same(*a.in[0], {a.in[1], a.out[0], shared ? a.in[3] : nullptr}, op);
  check_routing(*a.in[2], d, op);
  activate();
  cudaStream_t stream = compute_;
  REMAT_MOE_LAUNCH(kernels::unpermute_fwd, ft(*a.in[0]), d.tokens * H, cp<T>(*a.in[0]), d.weight_input ? nullptr : cp<T>(*a.in[1]),
                   shared ? cp<T>(*a.in[3]) : nullptr, static_cast<T*>(a.out[0]->data), rows_of(*a.in[2], d), d.tokens,
                   d.top_k, H);
}

void CudaBackend::bwd_MoeUnpermute(const OpArgs& a) {
  const char* op = "moe_unpermute_bwd";
  const MoeDims& d = a.moe;
  check_moe(d, op);
  const int H = a.K;
  const std::int64_t n = d.tokens * d.top_k;
  check_float(*a.in[0], op, "yp", d.rows() * H);
  check_float(*a.in[1], op, "weights", n);
  check_float(*a.dout[0], op, "dy", d.tokens * H);
  check_routing(*a.in[2], d, op);
  activate();
  cudaStream_t stream = compute_;
  const std::int32_t* row = rows_of(*a.in[2], d);
  if (a.din[0] && *a.din[0]) {
    check_float(*a.din[0], op, "dyp", d.rows() * H);
    if (!a.acc[0] && d.capacity > 0) REMAT_CUDA(cudaMemsetAsync(a.din[0]->data, 0, a.din[0]->bytes(), stream));
    REMAT_MOE_LAUNCH(kernels::unpermute_bwd_rows, ft(*a.in[0]), n * H, d.weight_input ? nullptr : cp<T>(*a.in[1]), cp<T>(*a.dout[0]),
                     static_cast<T*>(a.din[0]->data), row, n, d.top_k, H, a.acc[0]);
  }
  if (a.din[3] && *a.din[3]) {  // the shared experts' output: dout itself
    check_float(*a.din[3], op, "dshared", d.tokens * H);
    REMAT_MOE_LAUNCH(kernels::copy_acc, ft(*a.in[0]), d.tokens * H, cp<T>(*a.dout[0]), static_cast<T*>(a.din[3]->data),
                     d.tokens * H, a.acc[3]);
  }
  if (a.din[1] && *a.din[1] && d.weight_input) {  // the weights went into the rows: 0 here
    check_float(*a.din[1], op, "dweights", n);
    if (!a.acc[1]) REMAT_CUDA(cudaMemsetAsync(a.din[1]->data, 0, a.din[1]->bytes(), stream));
  } else if (a.din[1] && *a.din[1]) {
    check_float(*a.din[1], op, "dweights", n);
    REMAT_MOE_LAUNCH(kernels::unpermute_bwd_weights, ft(*a.in[0]), n, cp<T>(*a.in[0]), cp<T>(*a.dout[0]),
                     static_cast<T*>(a.din[1]->data), row, n, d.top_k, H, a.acc[1]);
  }
}

void CudaBackend::fwd_SigmoidGate(const OpArgs& a) {
  const char* op = "sigmoid_gate_fwd";
  check_float(*a.in[0], op, "x", a.M * a.K);
  check_float(*a.in[1], op, "g", a.M);
  check_float(*a.out[0], op, "y", a.M * a.K);
  check_same(*a.in[0], {a.in[1], a.out[0]}, op);
  activate();
  cudaStream_t stream = compute_;
  REMAT_MOE_LAUNCH(kernels::sigmoid_gate_fwd, ft(*a.in[0]), a.M * a.K, cp<T>(*a.in[0]), cp<T>(*a.in[1]),
                   static_cast<T*>(a.out[0]->data), a.M, a.K);
}

void CudaBackend::bwd_SigmoidGate(const OpArgs& a) {
  const char* op = "sigmoid_gate_bwd";
  check_float(*a.in[0], op, "x", a.M * a.K);
  check_float(*a.in[1], op, "g", a.M);
  check_float(*a.dout[0], op, "dy", a.M * a.K);
  const bool has_dx = a.din[0] && *a.din[0], has_dg = a.din[1] && *a.din[1];
  if (has_dx) check_float(*a.din[0], op, "dx", a.M * a.K);
  if (has_dg) check_float(*a.din[1], op, "dg", a.M);
  check_same(*a.in[0], {a.in[1], a.dout[0], has_dx ? a.din[0] : nullptr, has_dg ? a.din[1] : nullptr}, op);
  activate();
  cudaStream_t stream = compute_;
  REMAT_MOE_LAUNCH(kernels::sigmoid_gate_bwd, ft(*a.in[0]), a.M, cp<T>(*a.in[0]), cp<T>(*a.in[1]), cp<T>(*a.dout[0]),
                   has_dx ? static_cast<T*>(a.din[0]->data) : nullptr, has_dg ? static_cast<T*>(a.din[1]->data) : nullptr,
                   a.M, a.K, a.acc[0], a.acc[1]);
}

}  // namespace remat::cuda
