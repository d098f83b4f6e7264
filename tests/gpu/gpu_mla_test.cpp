// Multi-head latent attention on CUDA against the CPU backend: the MlaPack op (forward, and
// backward storing and accumulating) bit for bit in fp32 and bf16, its size check's words; and
// the attention ops with value heads of their own width (AttnDims::dv, narrower and wider than
// the q and k heads): the naive ops (the fused probabilities kernel where the row allows it, else
// cuBLAS) and flash attention (the scalar kernels; the tensor-core path must step aside), with
// and without a window, within the usual relative L2 error (gpu_test_util.h). Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/backend/mla_pack.h"
#include "core/util/error.h"
#include "tests/gpu/gpu_test_util.h"

namespace remat::gputest {
namespace {

// The CPU tensor's bytes (its memory is the host's).
std::vector<std::uint8_t> cpu_bytes(const Both& b) {
  std::vector<std::uint8_t> v(b.c.bytes());
  std::memcpy(v.data(), b.c.data, v.size());
  return v;
}

// How many elements differ in their bits (and the first one), for a readable failure.
::testing::AssertionResult same_bits(Dual& d, const Both& b) {
  const std::vector<std::uint8_t> g = d.gpu_bytes(b.g), c = cpu_bytes(b);
  if (g == c) return ::testing::AssertionSuccess();
  const std::size_t es = b.dt == DType::BF16 ? 2 : 4;
  std::size_t n = 0, first = 0;
  for (std::size_t i = 0; i < g.size() / es; ++i)
    if (std::memcmp(&g[i * es], &c[i * es], es) != 0 && n++ == 0) first = i;
  const std::vector<float> gv = d.gpu_read(b), cv = d.cpu_read(b);
  return ::testing::AssertionFailure() << n << " of " << b.n << " elements differ, the first at "
                                       << first << ": gpu " << gv[first] << ", cpu " << cv[first];
}

// ---------------------------------------------------------------------------------------------
// MlaPack
// ---------------------------------------------------------------------------------------------

struct PackCase {
  int B, S, heads, d, r, dv;
  float scaling;
};

class GpuMlaPack : public ::testing::TestWithParam<DType> {};

TEST_P(GpuMlaPack, ForwardAndBackwardMatchTheCpuBitForBit) {
  REMAT_REQUIRE_GPU();
  const DType dt = GetParam();
  // Value heads narrower and wider than the q and k heads; no unrotated dims at all (r = d);
  // a scaled rotation; the positions wrap per sequence (t % S).
  for (const PackCase pc : {PackCase{2, 37, 3, 12, 4, 6, 1.0f}, PackCase{3, 11, 2, 8, 8, 12, 1.3f},
                            PackCase{1, 64, 4, 24, 8, 16, 0.9f}}) {
    SCOPED_TRACE("heads " + std::to_string(pc.heads) + " d " + std::to_string(pc.d) + " r " +
                 std::to_string(pc.r) + " dv " + std::to_string(pc.dv));
    Dual d;
    std::vector<float> inv_freq(static_cast<std::size_t>(pc.r / 2));
    for (int i = 0; i < pc.r / 2; ++i)
      inv_freq[i] = std::pow(10000.0f, -2.0f * static_cast<float>(i) / static_cast<float>(pc.r));
    OpArgs base;
    base.attn.B = pc.B, base.attn.S = pc.S, base.attn.heads = pc.heads,
    base.attn.kv_heads = pc.heads;
    base.attn.d = pc.d, base.attn.dv = pc.dv;
    base.rope.inv_freq = inv_freq.data(), base.rope.rotary_dim = pc.r;
    base.rope.attention_scaling = pc.scaling;
    const MlaPackDims m = mla_pack_dims(base.attn, base.rope, "test", "mla_pack");
    const std::int64_t M = m.rows;
    ASSERT_EQ(m.out_width(), base.attn.qkv_width());
    Both q = d.random(dt, M * m.q_width(), -2, 2, 1), kv = d.random(dt, M * m.kv_width(), -2, 2, 2);
    Both kpe = d.random(dt, M * m.r, -2, 2, 3), out = d.poisoned(dt, M * m.out_width());
    for (bool c : {true, false}) {
      Backend& be = c ? static_cast<Backend&>(d.cpu) : static_cast<Backend&>(*d.gpu);
      OpArgs a = base;
      a.in[0] = c ? &q.c : &q.g, a.in[1] = c ? &kv.c : &kv.g, a.in[2] = c ? &kpe.c : &kpe.g;
      a.out[0] = c ? &out.c : &out.g;
      be.run(OpKind::MlaPack, Pass::Forward, a);
    }
    d.gpu->synchronize();
    EXPECT_TRUE(same_bits(d, out)) << "forward";
    Both g = d.random(dt, M * m.out_width(), -1, 1, 4);
    for (int acc = 0; acc < 2; ++acc) {
      SCOPED_TRACE("acc " + std::to_string(acc));
      // Storing: every element written (NaN otherwise); accumulating: onto the same values.
      Both dq = acc ? d.random(dt, M * m.q_width(), -1, 1, 5) : d.poisoned(dt, M * m.q_width());
      Both dkv = acc ? d.random(dt, M * m.kv_width(), -1, 1, 6) : d.poisoned(dt, M * m.kv_width());
      Both dpe = acc ? d.random(dt, M * m.r, -1, 1, 7) : d.poisoned(dt, M * m.r);
      for (bool c : {true, false}) {
        Backend& be = c ? static_cast<Backend&>(d.cpu) : static_cast<Backend&>(*d.gpu);
        OpArgs a = base;
        a.in[0] = c ? &q.c : &q.g, a.in[1] = c ? &kv.c : &kv.g, a.in[2] = c ? &kpe.c : &kpe.g;
        a.out[0] = c ? &out.c : &out.g;
        a.dout[0] = c ? &g.c : &g.g;
        a.din[0] = c ? &dq.c : &dq.g, a.din[1] = c ? &dkv.c : &dkv.g,
        a.din[2] = c ? &dpe.c : &dpe.g;
        a.acc[0] = a.acc[1] = a.acc[2] = acc != 0;
        be.run(OpKind::MlaPack, Pass::Backward, a);
      }
      d.gpu->synchronize();
      EXPECT_TRUE(same_bits(d, dq)) << "dq";
      EXPECT_TRUE(same_bits(d, dkv)) << "dkv";
      EXPECT_TRUE(same_bits(d, dpe)) << "dk_pe";
    }
    // Mixed accumulation flags: dq stored, dkv and dk_pe accumulated.
    Both dq = d.poisoned(dt, M * m.q_width()), dkv = d.random(dt, M * m.kv_width(), -1, 1, 8);
    Both dpe = d.random(dt, M * m.r, -1, 1, 9);
    for (bool c : {true, false}) {
      Backend& be = c ? static_cast<Backend&>(d.cpu) : static_cast<Backend&>(*d.gpu);
      OpArgs a = base;
      a.dout[0] = c ? &g.c : &g.g;
      a.din[0] = c ? &dq.c : &dq.g, a.din[1] = c ? &dkv.c : &dkv.g, a.din[2] = c ? &dpe.c : &dpe.g;
      a.acc[0] = false, a.acc[1] = a.acc[2] = true;
      be.run(OpKind::MlaPack, Pass::Backward, a);
    }
    d.gpu->synchronize();
    EXPECT_TRUE(same_bits(d, dq)) << "dq (mixed flags)";
    EXPECT_TRUE(same_bits(d, dkv)) << "dkv (mixed flags)";
    EXPECT_TRUE(same_bits(d, dpe)) << "dk_pe (mixed flags)";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuMlaPack, ::testing::Values(DType::F32, DType::BF16),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return std::string(i.param == DType::BF16 ? "bf16" : "fp32");
                         });

// Bad sizes are refused by both backends with the same words ("cuda" for "cpu").
TEST(GpuMlaPackArgs, BadDimsAreRefusedAsOnTheCpu) {
  REMAT_REQUIRE_GPU();
  Dual d;
  std::vector<float> inv_freq(8, 0.5f);
  struct Bad {
    int kv_heads, r;
  };
  for (const Bad bad : {Bad{1, 4}, Bad{2, 3}, Bad{2, 14}, Bad{2, 0}}) {
    OpArgs a;
    a.attn.B = 1, a.attn.S = 4, a.attn.heads = 2, a.attn.kv_heads = bad.kv_heads, a.attn.d = 12;
    a.attn.dv = 6;
    a.rope.inv_freq = inv_freq.data(), a.rope.rotary_dim = bad.r;
    Both q = d.alloc(DType::F32, 4 * 24), kv = d.alloc(DType::F32, 4 * 64),
         kpe = d.alloc(DType::F32, 64), out = d.alloc(DType::F32, 4 * 64);
    std::string msg[2];
    for (int c = 0; c < 2; ++c) {
      Backend& be = c ? static_cast<Backend&>(d.cpu) : static_cast<Backend&>(*d.gpu);
      a.in[0] = c ? &q.c : &q.g, a.in[1] = c ? &kv.c : &kv.g, a.in[2] = c ? &kpe.c : &kpe.g;
      a.out[0] = c ? &out.c : &out.g;
      try {
        be.run(OpKind::MlaPack, Pass::Forward, a);
        ADD_FAILURE() << (c ? "cpu" : "cuda") << " accepted kv_heads " << bad.kv_heads << " r "
                      << bad.r;
      } catch (const Error& e) {
        msg[c] = e.what();
      }
    }
    ASSERT_EQ(msg[1].rfind("cpu ", 0), 0u) << msg[1];
    EXPECT_EQ(msg[0], "cuda " + msg[1].substr(4));
  }
}

// ---------------------------------------------------------------------------------------------
// Attention with value heads of their own width
// ---------------------------------------------------------------------------------------------

struct DvCase {
  DType dt;
  int B, S, heads, kv, d, dv;
  int window = 0;
  float p = 0.0f;  // attention dropout (flash only)
};

std::string dv_name(const ::testing::TestParamInfo<DvCase>& i) {
  const DvCase& c = i.param;
  std::string s = c.dt == DType::BF16 ? "bf16" : "fp32";
  s += "_S" + std::to_string(c.S) + "_h" + std::to_string(c.heads) + "_kv" + std::to_string(c.kv) +
       "_d" + std::to_string(c.d) + "_dv" + std::to_string(c.dv);
  if (c.window > 0) s += "_w" + std::to_string(c.window);
  if (c.p > 0) s += "_drop";
  return s;
}

class GpuAttentionDv : public ::testing::TestWithParam<DvCase> {
 protected:
  void SetUp() override {
    REMAT_REQUIRE_GPU();
    d = std::make_unique<Dual>();
    c = GetParam();
    a.B = c.B, a.S = c.S, a.heads = c.heads, a.kv_heads = c.kv, a.d = c.d, a.dv = c.dv;
    a.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    a.window = c.window;
    key.seed = 0x5eedULL, key.step = 3, key.block = 2, key.site = kSiteAttentionProbs;
    nqkv = static_cast<std::int64_t>(a.B) * a.S * a.qkv_width();
    nprobs = static_cast<std::int64_t>(a.B) * a.heads * a.S * a.S;
    nctx = static_cast<std::int64_t>(a.B) * a.S * a.ctx_width();
    nlse = static_cast<std::int64_t>(a.B) * a.heads * a.S;
  }
  template <class F>
  void both(F&& f) {
    f(d->cpu, true);
    f(*d->gpu, false);
  }
  double tl() const { return tol(c.dt); }

  std::unique_ptr<Dual> d;
  DvCase c{};
  AttnDims a;
  DropoutKey key;
  std::int64_t nqkv = 0, nprobs = 0, nctx = 0, nlse = 0;
};

#define T(b, is_cpu) ((is_cpu) ? (b).c : (b).g)

TEST_P(GpuAttentionDv, NaiveOpsMatchCpu) {
  ASSERT_NE(a.v_dim(), a.d);
  Both qkv = d->random(c.dt, nqkv, -1.0f, 1.0f, 1);
  Both probs = d->poisoned(c.dt, nprobs);
  both([&](auto& b, bool cc) { b.attn_softmax_fwd(T(qkv, cc), T(probs, cc), a); });
  EXPECT_LE(d->rel(probs), tl()) << "attn_softmax_fwd";
  Both ctx = d->poisoned(c.dt, nctx);
  both([&](auto& b, bool cc) { b.attn_pv_fwd(T(probs, cc), T(qkv, cc), T(ctx, cc), a); });
  EXPECT_LE(d->rel(ctx), tl()) << "attn_pv_fwd";
  Both dctx = d->random(c.dt, nctx, -1.0f, 1.0f, 2);
  for (int acc = 0; acc < 2; ++acc) {
    Both dp = acc ? d->random(c.dt, nprobs, -0.5f, 0.5f, 3) : d->poisoned(c.dt, nprobs);
    Both dqkv = d->random(c.dt, nqkv, -0.1f, 0.1f, 4);
    both([&](auto& b, bool cc) {
      b.attn_pv_bwd(T(probs, cc), T(qkv, cc), T(dctx, cc), T(dp, cc), T(dqkv, cc), a, acc);
    });
    EXPECT_LE(d->rel(dp), tl()) << "attn_pv_bwd dp acc=" << acc;
    EXPECT_LE(d->rel(dqkv), tl()) << "attn_pv_bwd dV acc=" << acc;
    both([&](auto& b, bool cc) {
      b.attn_softmax_bwd(T(qkv, cc), T(probs, cc), T(dp, cc), T(dqkv, cc), a);
    });
    EXPECT_LE(d->rel(dqkv), tl()) << "attn_softmax_bwd dQ dK acc=" << acc;
  }
  // The cuBLAS scores path gives the same probabilities as the fused kernel (where it runs).
  cuda::CudaBackend& g = *d->gpu;
  Both gemm = d->poisoned(c.dt, nprobs);
  g.set_fused_probs(false);
  g.attn_softmax_fwd(qkv.g, gemm.g, a);
  g.set_fused_probs(true);
  EXPECT_LE(rel_l2(d->gpu_read(gemm), d->gpu_read(probs)), tl()) << "cuBLAS path against default";
}

TEST_P(GpuAttentionDv, FlashMatchesCpu) {
  Both qkv = d->random(c.dt, nqkv, -1.0f, 1.0f, 5);
  Both ctx = d->poisoned(c.dt, nctx);
  Both lse = d->poisoned(DType::F32, nlse);
  both([&](auto& b, bool cc) { b.flash_fwd(T(qkv, cc), T(ctx, cc), T(lse, cc), a, key, c.p); });
  EXPECT_LE(d->rel(ctx), tl()) << "flash_fwd ctx";
  EXPECT_LE(d->rel(lse), c.dt == DType::BF16 ? 1e-3 : 1e-5) << "flash_fwd lse";
  Both dctx = d->random(c.dt, nctx, -1.0f, 1.0f, 6);
  Both dqkv = d->random(c.dt, nqkv, -0.1f, 0.1f, 7);
  // Both backends start from the CPU's ctx and lse, so only the backward is compared.
  std::vector<std::uint8_t> cb(ctx.c.bytes()), lb(lse.c.bytes());
  d->cpu.read_bytes(ctx.c, cb.data());
  d->cpu.read_bytes(lse.c, lb.data());
  d->gpu->write_bytes(ctx.g, cb.data());
  d->gpu->write_bytes(lse.g, lb.data());
  both([&](auto& b, bool cc) {
    b.flash_bwd(T(qkv, cc), T(ctx, cc), T(lse, cc), T(dctx, cc), T(dqkv, cc), a, key, c.p);
  });
  EXPECT_LE(d->rel(dqkv), tl()) << "flash_bwd dqkv";
}

// Value heads of another width have no tensor-core flash path: Auto runs the scalar kernels (the
// same bits as asking for them), and asking for tensor cores is refused by name.
TEST_P(GpuAttentionDv, FlashTakesTheScalarPath) {
  cuda::CudaBackend& g = *d->gpu;
  kernels::FlashArgs fa;
  fa.d = c.d, fa.dv = c.dv;
  Both qkv = d->random(c.dt, nqkv, -1.0f, 1.0f, 8);
  Tensor ctx[2], lse[2];
  for (int i = 0; i < 2; ++i) {
    ctx[i] = d->gpu_alloc(c.dt, nctx);
    lse[i] = d->gpu_alloc(DType::F32, nlse);
  }
  fa.qkv = qkv.g.data, fa.ctx = ctx[0].data;
  EXPECT_FALSE(kernels::flash_tc_supported(kernels::FType::BF16, fa, false));
  g.flash_fwd(qkv.g, ctx[0], lse[0], a, key, c.p);
  g.set_flash_impl(kernels::FlashImpl::Scalar);
  g.flash_fwd(qkv.g, ctx[1], lse[1], a, key, c.p);
  g.set_flash_impl(kernels::FlashImpl::TensorCore);
  EXPECT_THROW(g.flash_fwd(qkv.g, ctx[1], lse[1], a, key, c.p), Error);
  g.set_flash_impl(kernels::FlashImpl::Auto);
  EXPECT_EQ(d->gpu_bytes(ctx[0]), d->gpu_bytes(ctx[1])) << "ctx";
  EXPECT_EQ(d->gpu_bytes(lse[0]), d->gpu_bytes(lse[1])) << "lse";
}

// Flash against the naive path on the GPU itself (with dropout: the masks of dropout_mask).
TEST_P(GpuAttentionDv, FlashMatchesNaiveOnGpu) {
  cuda::CudaBackend& g = *d->gpu;
  Both qkv = d->random(c.dt, nqkv, -1.0f, 1.0f, 9);
  Tensor probs = d->gpu_alloc(c.dt, nprobs), dropped = d->gpu_alloc(c.dt, nprobs),
         mask = d->gpu_alloc(DType::U8, nprobs), ctx_n = d->gpu_alloc(c.dt, nctx),
         ctx_f = d->gpu_alloc(c.dt, nctx), lse = d->gpu_alloc(DType::F32, nlse);
  g.attn_softmax_fwd(qkv.g, probs, a);
  Tensor p_used = probs;
  if (c.p > 0) {
    g.dropout_mask(mask, key, c.p, nprobs);
    g.dropout_fwd(probs, mask, dropped, c.p, nprobs);
    p_used = dropped;
  }
  g.attn_pv_fwd(p_used, qkv.g, ctx_n, a);
  g.flash_fwd(qkv.g, ctx_f, lse, a, key, c.p);
  std::vector<float> vn, vf;
  g.read(ctx_n, vn);
  g.read(ctx_f, vf);
  EXPECT_LE(rel_l2(vf, vn), tl()) << "flash ctx vs naive ctx";
  Both dctx = d->random(c.dt, nctx, -1.0f, 1.0f, 10);
  Both dq_n = d->upload(c.dt, std::vector<float>(static_cast<std::size_t>(nqkv), 0.0f));
  Both dq_f = d->upload(c.dt, std::vector<float>(static_cast<std::size_t>(nqkv), 0.0f));
  Tensor dp = d->gpu_alloc(c.dt, nprobs), dprobs = d->gpu_alloc(c.dt, nprobs);
  g.attn_pv_bwd(p_used, qkv.g, dctx.g, dp, dq_n.g, a, false);
  Tensor dsoft = dp;
  if (c.p > 0) {
    g.dropout_bwd(dp, mask, dprobs, c.p, nprobs, false);
    dsoft = dprobs;
  }
  g.attn_softmax_bwd(qkv.g, probs, dsoft, dq_n.g, a);
  g.flash_bwd(qkv.g, ctx_n, lse, dctx.g, dq_f.g, a, key, c.p);
  EXPECT_LE(rel_l2(d->gpu_read(dq_f), d->gpu_read(dq_n)), c.dt == DType::BF16 ? 2e-2 : 1e-5)
      << "flash dqkv vs naive dqkv";
}

#undef T

// d 12 / dv 6 and d 8 / dv 12 (the brief's two shapes) with GQA, with and without a window; d 32
// with rows the fused probabilities kernel can read (dv 16) and rows it cannot (dv 12); the
// latent attention's own head (d 192, dv 128); one dropout case for flash.
INSTANTIATE_TEST_SUITE_P(
    Shapes, GpuAttentionDv,
    ::testing::Values(
        DvCase{DType::F32, 2, 37, 4, 2, 12, 6}, DvCase{DType::F32, 2, 37, 4, 2, 12, 6, 9},
        DvCase{DType::BF16, 2, 37, 4, 2, 12, 6}, DvCase{DType::BF16, 2, 37, 4, 2, 12, 6, 9},
        DvCase{DType::F32, 1, 45, 2, 2, 8, 12}, DvCase{DType::F32, 1, 45, 2, 2, 8, 12, 7},
        DvCase{DType::BF16, 1, 45, 2, 2, 8, 12}, DvCase{DType::BF16, 1, 45, 2, 2, 8, 12, 7},
        DvCase{DType::BF16, 2, 70, 2, 1, 32, 16}, DvCase{DType::BF16, 2, 70, 2, 1, 32, 12, 20},
        DvCase{DType::F32, 1, 40, 2, 2, 192, 128}, DvCase{DType::BF16, 1, 40, 2, 2, 192, 128, 16},
        DvCase{DType::F32, 2, 33, 4, 2, 12, 6, 0, 0.1f}),
    dv_name);

}  // namespace
}  // namespace remat::gputest
