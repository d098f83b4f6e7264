// Timings, not checks: disabled by default, run with
//   remat_gpu_tests --gtest_also_run_disabled_tests --gtest_filter='GpuBench.*'
// Prints milliseconds and TFLOP/s (or GB/s) of flash attention (tensor-core and scalar), the
// naive attention path, a GEMM and the layernorm, at GPT-2 small and Llama-like sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>

#include <cuda_runtime.h>

#include "core/util/bf16.h"
#include "tests/gpu/gpu_test_util.h"

namespace remat::gputest {
namespace {

class Timer {
 public:
  explicit Timer(cudaStream_t s) : s_(s) {
    cudaEventCreate(&a_);
    cudaEventCreate(&b_);
  }
  ~Timer() {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  // Mean milliseconds of `iters` runs after `warm` warm-up runs.
  double time(const std::function<void()>& f, int warm = 2, int iters = 5) {
    for (int i = 0; i < warm; ++i) f();
    cudaEventRecord(a_, s_);
    for (int i = 0; i < iters; ++i) f();
    cudaEventRecord(b_, s_);
    cudaEventSynchronize(b_);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, a_, b_);
    return ms / iters;
  }

 private:
  cudaStream_t s_;
  cudaEvent_t a_{}, b_{};
};

void fill(cuda::CudaBackend& g, const Tensor& t, std::uint32_t seed) {
  std::vector<std::uint16_t> v(static_cast<std::size_t>(t.numel));
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& e : v) {
    x = x * 1664525u + 1013904223u;
    const float f = (static_cast<float>(x >> 8) / 16777216.0f - 0.5f);
    e = float_to_bf16(f);
  }
  g.write_bytes(t, v.data());
}

TEST(GpuBench, DISABLED_AttentionGemmNorm) {
  REMAT_REQUIRE_GPU();
  Dual d(std::size_t{1} << 30);
  cuda::CudaBackend& g = *d.gpu;
  Timer tm(g.compute_stream());
  struct Shape {
    const char* name;
    int B, S, heads, kv, dd;
  };
  for (Shape sh : {Shape{"gpt2-small", 8, 1024, 12, 12, 64}, Shape{"llama-like", 2, 2048, 32, 8, 128}}) {
    AttnDims a;
    a.B = sh.B;
    a.S = sh.S;
    a.heads = sh.heads;
    a.kv_heads = sh.kv;
    a.d = sh.dd;
    a.scale = 1.0f / std::sqrt(static_cast<float>(sh.dd));
    const std::int64_t nqkv = static_cast<std::int64_t>(a.B) * a.S * (a.heads + 2 * a.kv_heads) * a.d;
    const std::int64_t nctx = static_cast<std::int64_t>(a.B) * a.S * a.heads * a.d;
    Tensor qkv = d.gpu_alloc(DType::BF16, nqkv), dqkv = d.gpu_alloc(DType::BF16, nqkv);
    Tensor ctx = d.gpu_alloc(DType::BF16, nctx), dctx = d.gpu_alloc(DType::BF16, nctx);
    Tensor lse = d.gpu_alloc(DType::F32, static_cast<std::int64_t>(a.B) * a.heads * a.S);
    fill(g, qkv, 1);
    fill(g, dctx, 2);
    g.fill_zero(dqkv);
    DropoutKey key;
    const double fwd_flops = 2.0 * 2.0 * a.B * a.heads * static_cast<double>(a.S) * a.S * a.d / 2.0;
    for (auto impl : {kernels::FlashImpl::TensorCore, kernels::FlashImpl::Scalar}) {
      g.set_flash_impl(impl);
      const int iters = impl == kernels::FlashImpl::Scalar ? 1 : 5;
      const double f = tm.time([&] { g.flash_fwd(qkv, ctx, lse, a, key, 0.0f); }, 1, iters);
      const double b = tm.time([&] { g.flash_bwd(qkv, ctx, lse, dctx, dqkv, a, key, 0.0f); }, 1, iters);
      const double fd = tm.time([&] { g.flash_fwd(qkv, ctx, lse, a, key, 0.1f); }, 1, iters);
      std::printf("[bench] %s flash %s: fwd %.3f ms (%.1f TFLOP/s), bwd %.3f ms (%.1f TFLOP/s), "
                  "fwd with dropout %.3f ms\n",
                  sh.name, impl == kernels::FlashImpl::Scalar ? "scalar" : "tensor-core", f,
                  fwd_flops / f / 1e9, b, 2.5 * fwd_flops / b / 1e9, fd);
    }
    g.set_flash_impl(kernels::FlashImpl::Auto);
    if (sh.S <= 1024) {
      Tensor probs = d.gpu_alloc(DType::BF16, static_cast<std::int64_t>(a.B) * a.heads * a.S * a.S);
      const double n = tm.time([&] {
        g.attn_softmax_fwd(qkv, probs, a);
        g.attn_pv_fwd(probs, qkv, ctx, a);
      });
      std::printf("[bench] %s naive attention fwd: %.3f ms\n", sh.name, n);
    }
  }
  {
    const std::int64_t M = 8192;
    const int K = 768, N = 3072;
    Tensor x = d.gpu_alloc(DType::BF16, M * K), W = d.gpu_alloc(DType::BF16, std::int64_t{N} * K);
    Tensor bias = d.gpu_alloc(DType::BF16, N), y = d.gpu_alloc(DType::BF16, M * N);
    fill(g, x, 3);
    fill(g, W, 4);
    fill(g, bias, 5);
    const double t = tm.time([&] { g.linear_fwd(x, W, &bias, y, M, K, N); });
    std::printf("[bench] linear_fwd %ldx%dx%d bf16: %.3f ms (%.1f TFLOP/s)\n", static_cast<long>(M),
                K, N, t, 2.0 * M * K * N / t / 1e9);
    Tensor dx = d.gpu_alloc(DType::BF16, M * K), dW = d.gpu_alloc(DType::BF16, std::int64_t{N} * K);
    Tensor db = d.gpu_alloc(DType::BF16, N);
    const double tb = tm.time([&] { g.linear_bwd(x, W, y, &dx, dW, &db, M, K, N, false); });
    std::printf("[bench] linear_bwd: %.3f ms (%.1f TFLOP/s)\n", tb, 4.0 * M * K * N / tb / 1e9);
    Tensor w = d.gpu_alloc(DType::BF16, K), lb = d.gpu_alloc(DType::BF16, K), ly = d.gpu_alloc(DType::BF16, M * K);
    fill(g, w, 6);
    fill(g, lb, 7);
    const double lf = tm.time([&] { g.layernorm_fwd(x, w, lb, ly, M, K, 1e-5f); });
    const double lbw = tm.time([&] { g.layernorm_bwd(x, w, ly, dx, w, lb, M, K, 1e-5f, false); });
    std::printf("[bench] layernorm 8192x768 fwd %.3f ms (%.0f GB/s), bwd %.3f ms (%.0f GB/s)\n", lf,
                2.0 * M * K * 2 / lf / 1e6, lbw, 3.0 * M * K * 2 / lbw / 1e6);
  }
}

}  // namespace
}  // namespace remat::gputest
