// Attention sinks (gpt-oss) on the GPU: the naive ops (the per-head path; the fused
// probabilities kernel has no sink column) and flash attention, scalar and tensor-core, against
// the CPU backend, forward and backward with the sinks' gradient added into a non-zero buffer;
// flash against naive on the GPU itself with dropout (the same Philox bits); and the same bits
// on a second run (the sinks' gradient is summed in a fixed order, no atomics).
#include <gtest/gtest.h>

#include <cmath>

#include "tests/gpu/gpu_test_util.h"

namespace remat::gputest {
namespace {

class GpuAttentionSinks : public ::testing::TestWithParam<AttnCase> {
 protected:
  void SetUp() override {
    REMAT_REQUIRE_GPU();
    d = std::make_unique<Dual>();
    c = GetParam();
    a = attn_dims(c);
    key = DropoutKey{0xabcdefULL, 3, 2, kSiteAttentionProbs};
    nqkv = static_cast<std::int64_t>(a.B) * a.S * a.qkv_width();
    nprobs = static_cast<std::int64_t>(a.B) * a.heads * a.S * a.S;
    nctx = static_cast<std::int64_t>(a.B) * a.S * a.ctx_width();
    nlse = static_cast<std::int64_t>(a.B) * a.heads * a.S;
    // Mixed sinks: ordinary, dominating (+8) and negligible (-30).
    std::vector<float> s = {0.5f, 8.0f, -30.0f, -1.5f};
    s.resize(a.heads, 0.25f);
    sinks = d->upload(c.dt, s);
  }
  double tl() const { return tol(c.dt); }

  std::unique_ptr<Dual> d;
  AttnCase c{};
  AttnDims a;
  DropoutKey key;
  Both sinks;
  std::int64_t nqkv = 0, nprobs = 0, nctx = 0, nlse = 0;
};

// a - b, element by element (a gradient's increment over its starting values).
std::vector<float> minus(std::vector<float> a, const std::vector<float>& b) {
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) a[i] -= b[i];
  return a;
}

#define ST(b, is_cpu) ((is_cpu) ? (b).c : (b).g)

TEST_P(GpuAttentionSinks, NaiveOpsMatchCpu) {
  Both qkv = d->random(c.dt, nqkv, -1.5f, 1.5f, 1);
  Both probs = d->poisoned(c.dt, nprobs);
  auto both = [&](auto&& f) {
    f(d->cpu, true);
    f(*d->gpu, false);
  };
  both(
      [&](auto& b, bool cc) { b.attn_softmax_fwd(ST(qkv, cc), ST(probs, cc), a, &ST(sinks, cc)); });
  EXPECT_LE(d->rel(probs), tl()) << "attn_softmax_fwd";
  Both dp = d->random(c.dt, nprobs, -0.5f, 0.5f, 3);
  Both dqkv = d->random(c.dt, nqkv, -0.1f, 0.1f, 4);
  Both dw = d->random(c.dt, a.heads, -0.5f, 0.5f, 5);
  const std::vector<float> dw0 = d->gpu_read(dw);
  both([&](auto& b, bool cc) {
    b.attn_softmax_bwd(ST(qkv, cc), ST(probs, cc), ST(dp, cc), ST(dqkv, cc), a, &ST(sinks, cc),
                       &ST(dw, cc));
  });
  EXPECT_LE(d->rel(dqkv), tl()) << "attn_softmax_bwd dQ dK";
  EXPECT_LE(d->rel(dw), tl()) << "attn_softmax_bwd dsinks";
  EXPECT_NE(d->gpu_read(dw), dw0) << "the sinks' gradient was not added";
  // The added part alone (dw0 may be most of dw's norm): CPU and GPU increments agree.
  EXPECT_LE(rel_l2(minus(d->gpu_read(dw), dw0), minus(d->cpu_read(dw), dw0)), tl()) << "dsinks increment";
  // The same bits again.
  Both dqkv2 = d->random(c.dt, nqkv, -0.1f, 0.1f, 4),
       dw2 = d->random(c.dt, a.heads, -0.5f, 0.5f, 5);
  d->gpu->attn_softmax_bwd(qkv.g, probs.g, dp.g, dqkv2.g, a, &sinks.g, &dw2.g);
  EXPECT_EQ(d->gpu_read(dqkv2), d->gpu_read(dqkv));
  EXPECT_EQ(d->gpu_read(dw2), d->gpu_read(dw));
}

TEST_P(GpuAttentionSinks, FlashMatchesCpuOnEachImplementation) {
  cuda::CudaBackend& g = *d->gpu;
  Both qkv = d->random(c.dt, nqkv, -1.5f, 1.5f, 11);
  Both dctx = d->random(c.dt, nctx, -1.0f, 1.0f, 12);
  Both ctx = d->poisoned(c.dt, nctx), lse = d->poisoned(DType::F32, nlse);
  Both dqkv = d->random(c.dt, nqkv, -0.1f, 0.1f, 13),
       dw = d->random(c.dt, a.heads, -0.5f, 0.5f, 14);
  const std::vector<float> w0 = d->cpu_read(dw);
  d->cpu.flash_fwd(qkv.c, ctx.c, lse.c, a, key, c.p, &sinks.c);
  d->cpu.flash_bwd(qkv.c, ctx.c, lse.c, dctx.c, dqkv.c, a, key, c.p, &sinks.c, &dw.c);
  const std::vector<float> ctx_c = d->cpu_read(ctx), lse_c = d->cpu_read(lse),
                           dq_c = d->cpu_read(dqkv), dw_c = d->cpu_read(dw);
  for (auto impl : {kernels::FlashImpl::Scalar, kernels::FlashImpl::TensorCore}) {
    kernels::FlashArgs fa;
    fa.qkv = qkv.g.data, fa.ctx = ctx.g.data, fa.dctx = dctx.g.data, fa.dqkv = dqkv.g.data;
    fa.d = a.d;
    if (impl == kernels::FlashImpl::TensorCore &&
        !kernels::flash_tc_supported(
            c.dt == DType::BF16 ? kernels::FType::BF16 : kernels::FType::F32, fa, true))
      continue;
    SCOPED_TRACE(impl == kernels::FlashImpl::Scalar ? "scalar" : "tensor cores");
    g.set_flash_impl(impl);
    Both dq = d->random(c.dt, nqkv, -0.1f, 0.1f, 13), w = d->random(c.dt, a.heads, -0.5f, 0.5f, 14);
    Tensor cg = d->gpu_alloc(c.dt, nctx), lg = d->gpu_alloc(DType::F32, nlse);
    g.flash_fwd(qkv.g, cg, lg, a, key, c.p, &sinks.g);
    g.flash_bwd(qkv.g, cg, lg, dctx.g, dq.g, a, key, c.p, &sinks.g, &w.g);
    EXPECT_LE(rel_l2(d->gpu_read(Both{Tensor{}, cg, c.dt, nctx}), ctx_c), tl()) << "ctx";
    EXPECT_LE(rel_l2(d->gpu_read(Both{Tensor{}, lg, DType::F32, nlse}), lse_c),
              c.dt == DType::BF16 ? 1e-3 : 1e-5)
        << "lse";
    EXPECT_LE(rel_l2(d->gpu_read(dq), dq_c), tl()) << "dqkv";
    EXPECT_LE(rel_l2(d->gpu_read(w), dw_c), tl()) << "dsinks";
    EXPECT_LE(rel_l2(minus(d->gpu_read(w), w0), minus(dw_c, w0)), tl()) << "dsinks increment";
    // The same bits again.
    Both dq2 = d->random(c.dt, nqkv, -0.1f, 0.1f, 13),
         w2 = d->random(c.dt, a.heads, -0.5f, 0.5f, 14);
    g.flash_bwd(qkv.g, cg, lg, dctx.g, dq2.g, a, key, c.p, &sinks.g, &w2.g);
    EXPECT_EQ(d->gpu_read(dq2), d->gpu_read(dq));
    EXPECT_EQ(d->gpu_read(w2), d->gpu_read(w));
  }
  g.set_flash_impl(kernels::FlashImpl::Auto);
}

// Flash against the naive chain on the GPU, dropout by the same mask bits.
TEST_P(GpuAttentionSinks, FlashAgreesWithNaiveOnTheGpu) {
  cuda::CudaBackend& g = *d->gpu;
  Both qkv = d->random(c.dt, nqkv, -1.5f, 1.5f, 21), dctx = d->random(c.dt, nctx, -1.0f, 1.0f, 22);
  Tensor probs = d->gpu_alloc(c.dt, nprobs), dropped = d->gpu_alloc(c.dt, nprobs),
         mask = d->gpu_alloc(DType::U8, nprobs), ctx_n = d->gpu_alloc(c.dt, nctx),
         ddrop = d->gpu_alloc(c.dt, nprobs), dp = d->gpu_alloc(c.dt, nprobs);
  Both dq_n = d->alloc(c.dt, nqkv), dw_n = d->alloc(c.dt, a.heads);
  g.fill_zero(dq_n.g);
  g.fill_zero(dw_n.g);
  g.attn_softmax_fwd(qkv.g, probs, a, &sinks.g);
  const Tensor& pv_in = c.p > 0 ? dropped : probs;
  if (c.p > 0) {
    g.dropout_mask(mask, key, c.p, nprobs);
    g.dropout_fwd(probs, mask, dropped, c.p, nprobs);
  }
  g.attn_pv_fwd(pv_in, qkv.g, ctx_n, a);
  g.attn_pv_bwd(pv_in, qkv.g, dctx.g, c.p > 0 ? ddrop : dp, dq_n.g, a, false);
  if (c.p > 0) g.dropout_bwd(ddrop, mask, dp, c.p, nprobs, false);
  g.attn_softmax_bwd(qkv.g, probs, dp, dq_n.g, a, &sinks.g, &dw_n.g);
  Both dq_f = d->alloc(c.dt, nqkv), dw_f = d->alloc(c.dt, a.heads);
  g.fill_zero(dq_f.g);
  g.fill_zero(dw_f.g);
  Tensor ctx_f = d->gpu_alloc(c.dt, nctx), lse = d->gpu_alloc(DType::F32, nlse);
  g.flash_fwd(qkv.g, ctx_f, lse, a, key, c.p, &sinks.g);
  g.flash_bwd(qkv.g, ctx_f, lse, dctx.g, dq_f.g, a, key, c.p, &sinks.g, &dw_f.g);
  EXPECT_LE(rel_l2(d->gpu_read(Both{Tensor{}, ctx_f, c.dt, nctx}),
                   d->gpu_read(Both{Tensor{}, ctx_n, c.dt, nctx})),
            2 * tl())
      << "ctx";
  EXPECT_LE(rel_l2(d->gpu_read(dq_f), d->gpu_read(dq_n)), 2 * tl()) << "dqkv";
  EXPECT_LE(rel_l2(d->gpu_read(dw_f), d->gpu_read(dw_n)), 2 * tl()) << "dsinks";
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuAttentionSinks,
                         ::testing::Values(AttnCase{DType::F32, 2, 70, 4, 2, 32, 0.0f},
                                           AttnCase{DType::F32, 1, 65, 4, 4, 48, 0.1f, 37},
                                           AttnCase{DType::F32, 2, 70, 4, 2, 32, 0.0f, 0, 2.0f},
                                           AttnCase{DType::BF16, 2, 130, 4, 2, 64, 0.0f},
                                           AttnCase{DType::BF16, 1, 200, 4, 1, 64, 0.2f, 37},
                                           AttnCase{DType::BF16, 1, 100, 4, 4, 128, 0.1f, 0, 50.0f},
                                           AttnCase{DType::BF16, 1, 77, 4, 2, 40, 0.0f, 1, 2.0f}),
                         attn_case_name);

}  // namespace
}  // namespace remat::gputest
