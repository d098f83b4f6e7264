// Every non-attention CUDA op against its CPU twin through the Backend interface: same bytes
// uploaded to both, outputs poisoned (0xFF) first so elements an op fails to write show up as
// NaN, relative L2 error <= 1e-2 (bf16) or 1e-5 (fp32). Dropout masks must be bit-equal.
#include <gtest/gtest.h>

#include "core/model/rope_scaling.h"

#include <cmath>
#include <cstring>

#include "core/util/error.h"
#include "tests/gpu/gpu_test_util.h"

namespace remat::gputest {
namespace {

class GpuOps : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    REMAT_REQUIRE_GPU();
    d = std::make_unique<Dual>();
    dt = GetParam();
  }
  // Runs the same call on both backends.
  template <class F>
  void both(F&& f) {
    // The concrete backends: block ops are their members (Backend has only run()).
    f(d->cpu, true);
    f(*d->gpu, false);
  }
  std::unique_ptr<Dual> d;
  DType dt = DType::F32;
};

std::string dtype_name(const ::testing::TestParamInfo<DType>& i) {
  return i.param == DType::BF16 ? "bf16" : "fp32";
}

#define T(b, is_cpu) ((is_cpu) ? (b).c : (b).g)

TEST_P(GpuOps, GeluForwardBackward) {
  for (std::int64_t n : {std::int64_t{10007}, std::int64_t{4096}}) {
    Both x = d->random(dt, n, -4.0f, 4.0f, 1);
    Both y = d->poisoned(dt, n);
    both([&](auto& b, bool c) { b.gelu_fwd(T(x, c), T(y, c), n); });
    EXPECT_LE(d->rel(y), tol(dt)) << "gelu_fwd n=" << n;
    Both dy = d->random(dt, n, -1.0f, 1.0f, 2);
    Both dx = d->poisoned(dt, n);
    both([&](auto& b, bool c) { b.gelu_bwd(T(x, c), T(dy, c), T(dx, c), n, false); });
    EXPECT_LE(d->rel(dx), tol(dt)) << "gelu_bwd n=" << n;
    Both dx2 = d->random(dt, n, -1.0f, 1.0f, 3);
    both([&](auto& b, bool c) { b.gelu_bwd(T(x, c), T(dy, c), T(dx2, c), n, true); });
    EXPECT_LE(d->rel(dx2), tol(dt)) << "gelu_bwd acc n=" << n;
  }
  // Unaligned views take the scalar path.
  const std::int64_t n = 999;
  Both x = d->random(dt, n + 1, -3.0f, 3.0f, 4);
  Both y = d->poisoned(dt, n + 1);
  both([&](auto& b, bool c) { b.gelu_fwd(T(x, c).slice(1, n), T(y, c).slice(1, n), n); });
  std::vector<float> g = d->gpu_read(y), r = d->cpu_read(y);
  g.erase(g.begin());
  r.erase(r.begin());
  EXPECT_LE(rel_l2(g, r), tol(dt)) << "gelu_fwd on an unaligned view";
}

TEST_P(GpuOps, GeluErfForwardBackward) {
  for (std::int64_t n : {std::int64_t{10007}, std::int64_t{4096}}) {
    Both x = d->random(dt, n, -5.0f, 5.0f, 11);
    Both y = d->poisoned(dt, n);
    both([&](auto& b, bool c) {
      OpArgs a;
      a.in[0] = &T(x, c), a.out[0] = &T(y, c), a.M = n;
      b.run(OpKind::GeluErf, Pass::Forward, a);
    });
    EXPECT_LE(d->rel(y), tol(dt)) << "gelu_erf_fwd n=" << n;
    Both dy = d->random(dt, n, -1.0f, 1.0f, 12);
    for (bool acc : {false, true}) {
      Both dx = acc ? d->random(dt, n, -1.0f, 1.0f, 13) : d->poisoned(dt, n);
      both([&](auto& b, bool c) {
        OpArgs a;
        a.in[0] = &T(x, c), a.dout[0] = &T(dy, c), a.din[0] = &T(dx, c), a.acc[0] = acc, a.M = n;
        b.run(OpKind::GeluErf, Pass::Backward, a);
      });
      EXPECT_LE(d->rel(dx), tol(dt)) << "gelu_erf_bwd n=" << n << " acc=" << acc;
    }
  }
}

TEST_P(GpuOps, SwigluForwardBackward) {
  for (int F : {96, 13}) {
    const std::int64_t rows = 37;
    Both gu = d->random(dt, rows * 2 * F, -3.0f, 3.0f, 5);
    Both y = d->poisoned(dt, rows * F);
    both([&](auto& b, bool c) { b.swiglu_fwd(T(gu, c), T(y, c), rows, F); });
    EXPECT_LE(d->rel(y), tol(dt)) << "swiglu_fwd F=" << F;
    Both dy = d->random(dt, rows * F, -1.0f, 1.0f, 6);
    Both dgu = d->poisoned(dt, rows * 2 * F);
    both([&](auto& b, bool c) { b.swiglu_bwd(T(gu, c), T(dy, c), T(dgu, c), rows, F, false); });
    EXPECT_LE(d->rel(dgu), tol(dt)) << "swiglu_bwd F=" << F;
    Both dgu2 = d->random(dt, rows * 2 * F, -1.0f, 1.0f, 7);
    both([&](auto& b, bool c) { b.swiglu_bwd(T(gu, c), T(dy, c), T(dgu2, c), rows, F, true); });
    EXPECT_LE(d->rel(dgu2), tol(dt)) << "swiglu_bwd acc F=" << F;
  }
}

TEST_P(GpuOps, GegluForwardBackward) {
  for (int F : {96, 13}) {
    const std::int64_t rows = 37;
    Both gu = d->random(dt, rows * 2 * F, -4.0f, 4.0f, 8);
    Both y = d->poisoned(dt, rows * F);
    auto fwd = [&](auto& b, bool c) {
      OpArgs a;
      a.in[0] = &T(gu, c), a.out[0] = &T(y, c), a.M = rows, a.K = F;
      b.run(OpKind::GeGlu, Pass::Forward, a);
    };
    both(fwd);
    EXPECT_LE(d->rel(y), tol(dt)) << "geglu_fwd F=" << F;
    Both dy = d->random(dt, rows * F, -1.0f, 1.0f, 9);
    for (bool acc : {false, true}) {
      Both dgu = acc ? d->random(dt, rows * 2 * F, -1.0f, 1.0f, 10) : d->poisoned(dt, rows * 2 * F);
      both([&](auto& b, bool c) {
        OpArgs a;
        a.in[0] = &T(gu, c), a.dout[0] = &T(dy, c), a.din[0] = &T(dgu, c), a.acc[0] = acc;
        a.M = rows, a.K = F;
        b.run(OpKind::GeGlu, Pass::Backward, a);
      });
      EXPECT_LE(d->rel(dgu), tol(dt)) << "geglu_bwd F=" << F << " acc=" << acc;
    }
  }
}

// gpt-oss's clamped SwiGLU (limit 1.5: values from -4 to 4 fall on both sides of both clamps).
TEST_P(GpuOps, SwiGluClampedForwardBackward) {
  for (int F : {96, 13}) {
    const std::int64_t rows = 37;
    Both gu = d->random(dt, rows * 2 * F, -4.0f, 4.0f, 18);
    Both y = d->poisoned(dt, rows * F);
    both([&](auto& b, bool c) {
      OpArgs a;
      a.in[0] = &T(gu, c), a.out[0] = &T(y, c), a.M = rows, a.K = F, a.limit = 1.5f;
      b.run(OpKind::SwiGluClamped, Pass::Forward, a);
    });
    EXPECT_LE(d->rel(y), tol(dt)) << "swiglu_clamped_fwd F=" << F;
    Both dy = d->random(dt, rows * F, -1.0f, 1.0f, 19);
    for (bool acc : {false, true}) {
      Both dgu = acc ? d->random(dt, rows * 2 * F, -1.0f, 1.0f, 20) : d->poisoned(dt, rows * 2 * F);
      both([&](auto& b, bool c) {
        OpArgs a;
        a.in[0] = &T(gu, c), a.dout[0] = &T(dy, c), a.din[0] = &T(dgu, c), a.acc[0] = acc;
        a.M = rows, a.K = F, a.limit = 1.5f;
        b.run(OpKind::SwiGluClamped, Pass::Backward, a);
      });
      EXPECT_LE(d->rel(dgu), tol(dt)) << "swiglu_clamped_bwd F=" << F << " acc=" << acc;
    }
  }
}

TEST_P(GpuOps, DropoutMasksAreBitEqualToCpu) {
  DropoutKey key;
  key.seed = 0x123456789abcdefULL;
  key.step = 7;
  key.block = 3;
  key.site = kSiteMlpResidual;
  for (float p : {0.0f, 0.1f, 0.5f}) {
    for (std::int64_t n : {std::int64_t{1}, std::int64_t{3}, std::int64_t{4}, std::int64_t{1001},
                           std::int64_t{(1 << 16) + 3}}) {
      Both m = d->poisoned(DType::U8, n);
      both([&](auto& b, bool c) { b.dropout_mask(T(m, c), key, p, n); });
      std::vector<std::uint8_t> cm(static_cast<std::size_t>(n)), gm(static_cast<std::size_t>(n));
      d->cpu.read_bytes(m.c, cm.data());
      d->gpu->read_bytes(m.g, gm.data());
      EXPECT_EQ(cm, gm) << "mask n=" << n << " p=" << p;
      std::int64_t kept = 0;
      for (auto v : gm) kept += v;
      if (p == 0.0f) EXPECT_EQ(kept, n);
    }
  }
  // An unaligned view of a mask (offset 1) is element-for-element the same formula.
  const std::int64_t n = 777;
  Both m = d->poisoned(DType::U8, n + 1);
  both([&](auto& b, bool c) { b.dropout_mask(T(m, c).slice(1, n), key, 0.3f, n); });
  EXPECT_EQ(d->gpu_bytes(m.g), [&] {
    std::vector<std::uint8_t> v(static_cast<std::size_t>(n + 1));
    d->cpu.read_bytes(m.c, v.data());
    return v;
  }());
}

// A mask's element i is element mask_position(key, i) of the global mask: a replica's offset and
// a tensor-parallel rank's runs of heads, aligned to Philox's groups of four or not.
TEST_P(GpuOps, DropoutMasksKeyedByGlobalPositionAreBitEqualToCpu) {
  struct Place {
    std::uint64_t offset, run, stride;
  };
  const Place places[] = {{8, 0, 0}, {5, 0, 0}, {8, 12, 36}, {3, 7, 19}, {1ull << 33, 64, 256}};
  DropoutKey key;
  key.seed = 0xabcdef0123ULL;
  key.step = 2;
  key.block = 5;
  key.site = kSiteAttentionProbs;
  for (const Place& pl : places) {
    key.offset = pl.offset;
    key.run = pl.run;
    key.stride = pl.stride;
    for (std::int64_t n : {std::int64_t{3}, std::int64_t{4}, std::int64_t{1001}, std::int64_t{(1 << 15) + 5}}) {
      Both m = d->poisoned(DType::U8, n);
      both([&](auto& b, bool c) { b.dropout_mask(T(m, c), key, 0.3f, n); });
      std::vector<std::uint8_t> cm(static_cast<std::size_t>(n));
      d->cpu.read_bytes(m.c, cm.data());
      EXPECT_EQ(d->gpu_bytes(m.g), cm) << "offset " << pl.offset << " run " << pl.run << " stride " << pl.stride
                                       << " n " << n;
    }
  }
}

TEST_P(GpuOps, DropoutApply) {
  const std::int64_t n = 5003;
  const float p = 0.2f;
  DropoutKey key;
  key.seed = 42;
  key.site = kSiteAttentionProbs;
  Both m = d->alloc(DType::U8, n);
  both([&](auto& b, bool c) { b.dropout_mask(T(m, c), key, p, n); });
  Both x = d->random(dt, n, -2.0f, 2.0f, 8);
  Both y = d->poisoned(dt, n);
  both([&](auto& b, bool c) { b.dropout_fwd(T(x, c), T(m, c), T(y, c), p, n); });
  EXPECT_LE(d->rel(y), tol(dt));
  Both dx = d->poisoned(dt, n);
  both([&](auto& b, bool c) { b.dropout_bwd(T(x, c), T(m, c), T(dx, c), p, n, false); });
  EXPECT_LE(d->rel(dx), tol(dt));
  Both dx2 = d->random(dt, n, -1.0f, 1.0f, 9);
  both([&](auto& b, bool c) { b.dropout_bwd(T(x, c), T(m, c), T(dx2, c), p, n, true); });
  EXPECT_LE(d->rel(dx2), tol(dt));
}

TEST_P(GpuOps, ResidualWithAndWithoutDropout) {
  const std::int64_t n = 4099;
  DropoutKey key;
  key.seed = 5;
  key.site = kSiteAttentionResidual;
  for (auto [p, mult] : {std::pair{0.0f, 1.0f}, std::pair{0.3f, 1.0f}, std::pair{0.0f, 0.22f},
                         std::pair{0.3f, 0.22f}}) {  // mult: Granite's residual_multiplier
    Both m = d->alloc(DType::U8, n);
    both([&](auto& b, bool c) { b.dropout_mask(T(m, c), key, p, n); });
    const bool use_mask = p > 0.0f;
    Both res = d->random(dt, n, -1.0f, 1.0f, 10);
    Both x = d->random(dt, n, -1.0f, 1.0f, 11);
    Both out = d->poisoned(dt, n);
    both([&](auto& b, bool c) {
      Tensor mk = T(m, c);
      b.residual_fwd(T(res, c), T(x, c), use_mask ? &mk : nullptr, T(out, c), p, n, mult);
    });
    EXPECT_LE(d->rel(out), tol(dt)) << "residual_fwd p=" << p << " mult=" << mult;
    for (int acc = 0; acc < 2; ++acc) {
      Both dres = acc ? d->random(dt, n, -1.0f, 1.0f, 12) : d->poisoned(dt, n);
      Both dxx = acc ? d->random(dt, n, -1.0f, 1.0f, 13) : d->poisoned(dt, n);
      both([&](auto& b, bool c) {
        Tensor mk = T(m, c);
        b.residual_bwd(T(out, c), use_mask ? &mk : nullptr, T(dres, c), T(dxx, c), p, n, acc,
                       acc, mult);
      });
      EXPECT_LE(d->rel(dres), tol(dt)) << "residual_bwd dres p=" << p << " acc=" << acc << " mult=" << mult;
      EXPECT_LE(d->rel(dxx), tol(dt)) << "residual_bwd dx p=" << p << " acc=" << acc << " mult=" << mult;
    }
  }
}

TEST_P(GpuOps, CastAndAddInto) {
  const std::int64_t n = 3333;
  Both master = d->random(DType::F32, n, -5.0f, 5.0f, 14);
  Both p = d->poisoned(dt, n);
  both([&](auto& b, bool c) { b.cast(T(p, c), T(master, c)); });
  EXPECT_LE(d->rel(p), dt == DType::BF16 ? 0.0 : 0.0) << "cast must round exactly like the CPU";
  Both back = d->poisoned(DType::F32, n);
  both([&](auto& b, bool c) { b.cast(T(back, c), T(p, c)); });
  EXPECT_EQ(d->rel(back), 0.0);
  Both a = d->random(dt, n, -1.0f, 1.0f, 15);
  Both s = d->random(dt, n, -1.0f, 1.0f, 16);
  both([&](auto& b, bool c) { b.add_into(T(a, c), T(s, c)); });
  EXPECT_LE(d->rel(a), tol(dt));
  Both f = d->random(DType::F32, n, -1.0f, 1.0f, 17);
  both([&](auto& b, bool c) { b.add_into(T(f, c), T(s, c)); });  // fp32 += model dtype
  EXPECT_LE(d->rel(f), 1e-6);
}

// scale 1, and Gemma's sqrt(H) (wte * scale; dwte += scale * dout).
TEST_P(GpuOps, Embedding) {
  const int B = 3, S = 17, V = 50;
  for (int H : {64, 36}) {
    for (int with_pe = 0; with_pe < 2; ++with_pe)
    for (float scale : {1.0f, std::sqrt(static_cast<float>(H))}) {
      std::vector<float> tok = uniform(B * S, 0.0f, static_cast<float>(V), 20 + H);
      for (auto& t : tok) t = std::floor(t);
      tok[0] = tok[5] = tok[9] = 7.0f;  // repeats in one token id
      Both tokens = d->upload(DType::I32, tok);
      Both wte = d->random(dt, static_cast<std::int64_t>(V) * H, -1.0f, 1.0f, 21);
      Both wpe = d->random(dt, static_cast<std::int64_t>(S) * H, -1.0f, 1.0f, 22);
      Both out = d->poisoned(dt, static_cast<std::int64_t>(B) * S * H);
      both([&](auto& b, bool c) {
        Tensor pe = T(wpe, c);
        b.embedding_fwd(T(tokens, c), T(wte, c), with_pe ? &pe : nullptr, T(out, c), B, S, H,
                        scale);
      });
      EXPECT_LE(d->rel(out), tol(dt)) << "embedding_fwd H=" << H << " pe=" << with_pe
                                      << " scale=" << scale;
      Both dout = d->random(dt, static_cast<std::int64_t>(B) * S * H, -1.0f, 1.0f, 23);
      Both dwte = d->random(dt, static_cast<std::int64_t>(V) * H, -0.1f, 0.1f, 24);
      Both dwpe = d->random(dt, static_cast<std::int64_t>(S) * H, -0.1f, 0.1f, 25);
      both([&](auto& b, bool c) {
        Tensor pe = T(dwpe, c);
        b.embedding_bwd(T(tokens, c), T(dout, c), T(dwte, c), with_pe ? &pe : nullptr, B, S, H,
                        scale);
      });
      EXPECT_LE(d->rel(dwte), tol(dt)) << "embedding_bwd dwte H=" << H << " scale=" << scale;
      if (with_pe) EXPECT_LE(d->rel(dwpe), tol(dt)) << "embedding_bwd dwpe H=" << H;
    }
  }
}

TEST_P(GpuOps, LayerNorm) {
  const std::int64_t rows = 67;
  for (int H : {96, 50, 1024}) {
    Both x = d->random(dt, rows * H, -2.0f, 3.0f, 30 + H);
    Both w = d->random(dt, H, 0.5f, 1.5f, 31);
    Both bias = d->random(dt, H, -0.5f, 0.5f, 32);
    Both y = d->poisoned(dt, rows * H);
    both([&](auto& b, bool c) { b.layernorm_fwd(T(x, c), T(w, c), T(bias, c), T(y, c), rows, H, 1e-5f); });
    EXPECT_LE(d->rel(y), tol(dt)) << "layernorm_fwd H=" << H;
    Both dy = d->random(dt, rows * H, -1.0f, 1.0f, 33);
    for (int acc = 0; acc < 2; ++acc) {
      Both dx = acc ? d->random(dt, rows * H, -1.0f, 1.0f, 34) : d->poisoned(dt, rows * H);
      Both dw = d->random(dt, H, -0.1f, 0.1f, 35);
      Both db = d->random(dt, H, -0.1f, 0.1f, 36);
      both([&](auto& b, bool c) {
        b.layernorm_bwd(T(x, c), T(w, c), T(dy, c), T(dx, c), T(dw, c), T(db, c), rows, H, 1e-5f,
                        acc);
      });
      EXPECT_LE(d->rel(dx), tol(dt)) << "layernorm_bwd dx H=" << H << " acc=" << acc;
      EXPECT_LE(d->rel(dw), tol(dt)) << "layernorm_bwd dw H=" << H;
      EXPECT_LE(d->rel(db), tol(dt)) << "layernorm_bwd db H=" << H;
    }
  }
}

// The weight as w (offset 0) and as Gemma's (1 + w) with w near 0 (offset 1).
TEST_P(GpuOps, RmsNorm) {
  const std::int64_t rows = 45;
  for (int H : {128, 50})
  for (float off : {0.0f, 1.0f}) {
    Both x = d->random(dt, rows * H, -2.0f, 2.0f, 40 + H);
    Both w = off != 0.0f ? d->random(dt, H, -0.5f, 0.5f, 41) : d->random(dt, H, 0.5f, 1.5f, 41);
    Both y = d->poisoned(dt, rows * H);
    both([&](auto& b, bool c) { b.rmsnorm_fwd(T(x, c), T(w, c), T(y, c), rows, H, 1e-6f, off); });
    EXPECT_LE(d->rel(y), tol(dt)) << "rmsnorm_fwd H=" << H << " offset=" << off;
    Both dy = d->random(dt, rows * H, -1.0f, 1.0f, 43);
    for (int acc = 0; acc < 2; ++acc) {
      Both dx = acc ? d->random(dt, rows * H, -1.0f, 1.0f, 44) : d->poisoned(dt, rows * H);
      Both dw = d->random(dt, H, -0.1f, 0.1f, 45);
      both([&](auto& b, bool c) {
        b.rmsnorm_bwd(T(x, c), T(w, c), T(dy, c), T(dx, c), T(dw, c), rows, H, 1e-6f, acc, off);
      });
      EXPECT_LE(d->rel(dx), tol(dt)) << "rmsnorm_bwd dx H=" << H << " acc=" << acc
                                     << " offset=" << off;
      EXPECT_LE(d->rel(dw), tol(dt)) << "rmsnorm_bwd dw H=" << H << " offset=" << off;
    }
  }
}

// QK-norm over rows q (K) | k (N) | v (N): K, N multiples of the vector width and not.
TEST_P(GpuOps, QkNorm) {
  const std::int64_t rows = 45;
  for (auto [K, N] : {std::pair{128, 64}, std::pair{50, 26}}) {
    const std::int64_t n = rows * (K + 2 * N);
    Both x = d->random(dt, n, -2.0f, 2.0f, 50 + K);
    Both wq = d->random(dt, K, 0.5f, 1.5f, 51), wk = d->random(dt, N, 0.5f, 1.5f, 52);
    Both y = d->poisoned(dt, n);
    both([&](auto& b, bool c) {
      OpArgs a;
      a.in[0] = &T(x, c), a.out[0] = &T(y, c), a.w = &T(wq, c), a.b = &T(wk, c);
      a.M = rows, a.K = K, a.N = N, a.eps = 1e-6f;
      b.run(OpKind::QkNorm, Pass::Forward, a);
    });
    EXPECT_LE(d->rel(y), tol(dt)) << "qk_norm_fwd K=" << K;
    Both dy = d->random(dt, n, -1.0f, 1.0f, 53);
    for (bool acc : {false, true}) {
      Both dx = acc ? d->random(dt, n, -1.0f, 1.0f, 54) : d->poisoned(dt, n);
      Both dwq = d->random(dt, K, -0.1f, 0.1f, 55), dwk = d->random(dt, N, -0.1f, 0.1f, 56);
      both([&](auto& b, bool c) {
        OpArgs a;
        a.in[0] = &T(x, c), a.dout[0] = &T(dy, c), a.din[0] = &T(dx, c), a.acc[0] = acc;
        a.w = &T(wq, c), a.b = &T(wk, c), a.dw = &T(dwq, c), a.db = &T(dwk, c);
        a.M = rows, a.K = K, a.N = N, a.eps = 1e-6f;
        b.run(OpKind::QkNorm, Pass::Backward, a);
      });
      EXPECT_LE(d->rel(dx), tol(dt)) << "qk_norm_bwd dx K=" << K << " acc=" << acc;
      EXPECT_LE(d->rel(dwq), tol(dt)) << "qk_norm_bwd dwq K=" << K;
      EXPECT_LE(d->rel(dwk), tol(dt)) << "qk_norm_bwd dwk K=" << K;
    }
  }
}

// Per-head QK-norm: heads of 128 (vector width) and of 10 (not, with (1 + w) weights), q and k
// weights one head wide.
TEST_P(GpuOps, QkHeadNorm) {
  const std::int64_t rows = 45;
  for (auto [hd, heads, kv] : {std::tuple{128, 4, 2}, std::tuple{10, 6, 3}}) {
    const int K = heads * hd, N = kv * hd;
    const std::int64_t n = rows * (K + 2 * N);
    Both x = d->random(dt, n, -2.0f, 2.0f, 150 + hd);
    Both wq = d->random(dt, hd, 0.5f, 1.5f, 151), wk = d->random(dt, hd, 0.5f, 1.5f, 152);
    Both y = d->poisoned(dt, n);
    auto args = [&](bool c) {
      OpArgs a;
      a.in[0] = &T(x, c), a.w = &T(wq, c), a.b = &T(wk, c);
      a.M = rows, a.K = K, a.N = N, a.eps = 1e-6f;
      a.attn.d = hd;
      a.w_offset = hd == 10 ? 1.0f : 0.0f;  // Gemma 3's (1 + w) on the second shape
      return a;
    };
    both([&](auto& b, bool c) {
      OpArgs a = args(c);
      a.out[0] = &T(y, c);
      b.run(OpKind::QkHeadNorm, Pass::Forward, a);
    });
    EXPECT_LE(d->rel(y), tol(dt)) << "qk_head_norm_fwd d=" << hd;
    Both dy = d->random(dt, n, -1.0f, 1.0f, 153);
    for (bool acc : {false, true}) {
      Both dx = acc ? d->random(dt, n, -1.0f, 1.0f, 154) : d->poisoned(dt, n);
      Both dwq = d->random(dt, hd, -0.1f, 0.1f, 155), dwk = d->random(dt, hd, -0.1f, 0.1f, 156);
      both([&](auto& b, bool c) {
        OpArgs a = args(c);
        a.dout[0] = &T(dy, c), a.din[0] = &T(dx, c), a.acc[0] = acc, a.dw = &T(dwq, c), a.db = &T(dwk, c);
        b.run(OpKind::QkHeadNorm, Pass::Backward, a);
      });
      EXPECT_LE(d->rel(dx), tol(dt)) << "qk_head_norm_bwd dx d=" << hd << " acc=" << acc;
      EXPECT_LE(d->rel(dwq), tol(dt)) << "qk_head_norm_bwd dwq d=" << hd;
      EXPECT_LE(d->rel(dwk), tol(dt)) << "qk_head_norm_bwd dwk d=" << hd;
    }
  }
}

TEST_P(GpuOps, Linear) {
  struct Dims {
    std::int64_t M;
    int K, N;
  };
  for (Dims dm : {Dims{70, 96, 80}, Dims{33, 50, 24}, Dims{256, 128, 384}}) {
    const std::int64_t M = dm.M;
    const int K = dm.K, N = dm.N;
    Both x = d->random(dt, M * K, -1.0f, 1.0f, 50 + K);
    Both W = d->random(dt, static_cast<std::int64_t>(N) * K, -0.5f, 0.5f, 51);
    Both bias = d->random(dt, N, -0.5f, 0.5f, 52);
    for (int with_b = 0; with_b < 2; ++with_b) {
      Both y = d->poisoned(dt, M * N);
      both([&](auto& b, bool c) {
        Tensor bb = T(bias, c);
        b.linear_fwd(T(x, c), T(W, c), with_b ? &bb : nullptr, T(y, c), M, K, N);
      });
      EXPECT_LE(d->rel(y), tol(dt)) << "linear_fwd M=" << M << " K=" << K << " N=" << N
                                    << " bias=" << with_b;
    }
    Both dy = d->random(dt, M * N, -1.0f, 1.0f, 53);
    for (int acc = 0; acc < 2; ++acc) {
      Both dx = acc ? d->random(dt, M * K, -1.0f, 1.0f, 54) : d->poisoned(dt, M * K);
      Both dW = d->random(dt, static_cast<std::int64_t>(N) * K, -0.1f, 0.1f, 55);
      Both db = d->random(dt, N, -0.1f, 0.1f, 56);
      both([&](auto& b, bool c) {
        Tensor xdx = T(dx, c), xdb = T(db, c);
        b.linear_bwd(T(x, c), T(W, c), T(dy, c), &xdx, T(dW, c), &xdb, M, K, N, acc);
      });
      EXPECT_LE(d->rel(dx), tol(dt)) << "linear_bwd dx acc=" << acc << " K=" << K;
      EXPECT_LE(d->rel(dW), tol(dt)) << "linear_bwd dW K=" << K;
      EXPECT_LE(d->rel(db), tol(dt)) << "linear_bwd db K=" << K;
    }
  }
}

// head_loss on both backends for `rows` rows against a vocabulary of V, compared with the CPU;
// returns the targets used (whole numbers in [0, V)). softcap > 0: soft-capped logits; w: the
// range of W's entries (larger: larger logits); mult: the logits' multiplier.
std::vector<float> check_head_loss(Dual& d, DType dt, Both& x, Both& W, Both& losses, Both& dx,
                                   Both& dW, std::int64_t rows, int H, int V, std::uint64_t seed,
                                   float softcap = 0.0f, float w = 0.3f, float mult = 1.0f) {
  std::vector<float> tg = uniform(rows, 0.0f, static_cast<float>(V), seed);
  for (auto& t : tg) t = std::floor(t);
  Both targets = d.upload(DType::I32, tg);
  x = d.random(dt, rows * H, -1.0f, 1.0f, seed + 1);
  W = d.random(dt, static_cast<std::int64_t>(V) * H, -w, w, seed + 2);
  losses = d.poisoned(DType::F32, rows);
  dx = d.poisoned(dt, rows * H);
  dW = d.random(dt, static_cast<std::int64_t>(V) * H, -0.01f, 0.01f, seed + 3);
  const float scale = 1.0f / static_cast<float>(rows);
  for (bool c : {true, false}) {
    Backend& b = c ? static_cast<Backend&>(d.cpu) : static_cast<Backend&>(*d.gpu);
    b.head_loss(T(x, c), T(W, c), T(targets, c), T(losses, c), T(dx, c), T(dW, c), rows, H, V,
                scale, softcap, mult);
  }
  EXPECT_LE(d.rel(losses), dt == DType::BF16 ? 1e-3 : 1e-5) << "losses softcap=" << softcap << " mult=" << mult;
  EXPECT_LE(d.rel(dx), tol(dt)) << "head dx softcap=" << softcap;
  EXPECT_LE(d.rel(dW), tol(dt)) << "head dW softcap=" << softcap;
  return tg;
}

TEST_P(GpuOps, HeadLossInChunks) {
  // V = 50304 makes the GPU chunk 320 rows, so 700 rows take three chunks.
  const std::int64_t rows = 700;
  const int V = 50304;
  EXPECT_LT(cuda::CudaBackend::head_chunk_rows(rows, V), rows);
  Both x, W, losses, dx, dW;
  check_head_loss(*d, dt, x, W, losses, dx, dW, rows, 64, V, 60);
}

TEST_P(GpuOps, HeadLossOddVocabAndBadTargets) {
  // V % 4 != 0 takes the kernel's one-element loads.
  const std::int64_t rows = 130;
  const int H = 32, V = 5003;
  Both x, W, losses, dx, dW;
  std::vector<float> tg = check_head_loss(*d, dt, x, W, losses, dx, dW, rows, H, V, 64);
  const float scale = 1.0f / static_cast<float>(rows);

  // Targets outside [0, V) (the CPU backend refuses them): a NaN loss and a zero gradient row
  // on the GPU; every other row as before, bit for bit.
  const std::vector<float> good = d->gpu_read(losses);
  tg[3] = -1.0f;
  tg[77] = static_cast<float>(V);
  Both bad = d->upload(DType::I32, tg);
  d->gpu->head_loss(T(x, false), T(W, false), T(bad, false), T(losses, false), T(dx, false),
                    T(dW, false), rows, H, V, scale, 0.0f, 1.0f);
  const std::vector<float> got = d->gpu_read(losses), gdx = d->gpu_read(dx);
  for (std::int64_t r = 0; r < rows; ++r) {
    if (r == 3 || r == 77) {
      EXPECT_TRUE(std::isnan(got[r])) << "row " << r;
      for (int h = 0; h < H; ++h) EXPECT_EQ(gdx[r * H + h], 0.0f) << "row " << r;
    } else {
      EXPECT_EQ(got[r], good[r]) << "row " << r;
    }
  }
}

TEST_P(GpuOps, HeadLossSoftCapped) {
  // Final-logit soft-capping (Gemma 2's 30, and 2 with logits large enough to saturate tanh),
  // with an odd vocabulary (one-element loads) and one divisible by 4, in two chunks.
  const std::int64_t rows = 130;
  const int H = 32;
  for (int V : {5003, 4096})
    for (float cap : {30.0f, 2.0f}) {
      Both x, W, losses, dx, dW;
      check_head_loss(*d, dt, x, W, losses, dx, dW, rows, H, V, 80 + V % 7, cap,
                      cap < 10.0f ? 2.0f : 0.3f);
    }
  d->gpu->set_head_chunk_bytes(std::size_t{64} * 5003 * 4);  // 64 rows: three chunks
  Both x, W, losses, dx, dW;
  check_head_loss(*d, dt, x, W, losses, dx, dW, rows, H, 5003, 90, 2.0f, 2.0f);
  d->gpu->set_head_chunk_bytes(cuda::CudaBackend::kHeadChunkBytes);
  // Scaled logits (Granite's 1 / logits_scaling), alone and under a cap.
  check_head_loss(*d, dt, x, W, losses, dx, dW, rows, H, 4096, 91, 0.0f, 2.0f, 1.0f / 16.0f);
  check_head_loss(*d, dt, x, W, losses, dx, dW, rows, H, 5003, 92, 2.0f, 0.3f, 3.0f);
  // A negative or non-finite cap is refused by name.
  Both targets = d->upload(DType::I32, std::vector<float>(static_cast<std::size_t>(rows), 0.0f));
  for (float bad : {-1.0f, std::nanf("")}) {
    try {
      d->gpu->head_loss(x.g, W.g, targets.g, losses.g, dx.g, dW.g, rows, H, 5003, 1.0f, bad, 1.0f);
      ADD_FAILURE() << "softcap " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("softcap"), std::string::npos) << e.what();
    }
  }
}

TEST_P(GpuOps, Rope) {
  AttnDims a;
  a.B = 2;
  a.S = 33;
  a.heads = 4;
  a.kv_heads = 2;
  a.d = 32;
  a.scale = 1.0f / std::sqrt(32.0f);
  const std::int64_t n = static_cast<std::int64_t>(a.B) * a.S * (a.heads + 2 * a.kv_heads) * a.d;
  Both in = d->random(dt, n, -1.0f, 1.0f, 70);
  Both out = d->poisoned(dt, n);
  RopeFrequencies freqs = rope_frequencies(RopeScaling{}, 10000.0f, a.d, a.S, a.S);
  const RopeTable rope{freqs.inv_freq.data(), a.d, 1.0f};
  both([&](auto& b, bool c) { b.rope_fwd(T(in, c), T(out, c), a, rope); });
  EXPECT_LE(d->rel(out), tol(dt)) << "rope_fwd";
  for (int acc = 0; acc < 2; ++acc) {
    Both din = acc ? d->random(dt, n, -1.0f, 1.0f, 71) : d->poisoned(dt, n);
    both([&](auto& b, bool c) { b.rope_bwd(T(out, c), T(din, c), a, rope, acc); });
    EXPECT_LE(d->rel(din), tol(dt)) << "rope_bwd acc=" << acc;
  }
}

TEST_P(GpuOps, RopePartialAndScaled) {
  // Partial rotary (the first rotary_dim dims of each q and k head rotated, the rest copied; in
  // the backward their gradient passes through) and cos, sin times an attention scaling.
  struct RopeCase {
    int d, rotary_dim;
    float scaling;
  };
  for (const RopeCase rc : {RopeCase{32, 16, 1.0f}, RopeCase{40, 20, 1.25f},
                            RopeCase{64, 64, 0.8f}, RopeCase{64, 2, 1.1f}}) {
    AttnDims a;
    a.B = 2;
    a.S = 33;
    a.heads = 4;
    a.kv_heads = 2;
    a.d = rc.d;
    a.scale = 1.0f / std::sqrt(static_cast<float>(rc.d));
    const std::int64_t n = static_cast<std::int64_t>(a.B) * a.S * (a.heads + 2 * a.kv_heads) * a.d;
    Both in = d->random(dt, n, -1.0f, 1.0f, 72);
    Both out = d->poisoned(dt, n);
    RopeFrequencies freqs = rope_frequencies(RopeScaling{}, 10000.0f, rc.rotary_dim, a.S, a.S);
    const RopeTable rope{freqs.inv_freq.data(), rc.rotary_dim, rc.scaling};
    both([&](auto& b, bool c) { b.rope_fwd(T(in, c), T(out, c), a, rope); });
    EXPECT_LE(d->rel(out), tol(dt)) << "rope_fwd d=" << rc.d << " rotary=" << rc.rotary_dim;
    // The dims past rotary_dim of every head come through unchanged.
    const std::vector<float> gi = d->gpu_read(in), go = d->gpu_read(out);
    const int width = (a.heads + 2 * a.kv_heads) * a.d;
    for (std::int64_t r = 0; r < static_cast<std::int64_t>(a.B) * a.S; ++r)
      for (int col = 0; col < width; ++col)
        if (col >= (a.heads + a.kv_heads) * a.d || col % a.d >= rc.rotary_dim)
          ASSERT_EQ(go[r * width + col], gi[r * width + col]) << "row " << r << " col " << col;
    for (int acc = 0; acc < 2; ++acc) {
      Both din = acc ? d->random(dt, n, -1.0f, 1.0f, 73) : d->poisoned(dt, n);
      both([&](auto& b, bool c) { b.rope_bwd(T(out, c), T(din, c), a, rope, acc); });
      EXPECT_LE(d->rel(din), tol(dt)) << "rope_bwd d=" << rc.d << " rotary=" << rc.rotary_dim
                                      << " acc=" << acc;
    }
  }
  // A rotary dim that is odd or past the head dim is refused.
  AttnDims a;
  a.B = 1, a.S = 4, a.heads = 1, a.kv_heads = 1, a.d = 16, a.scale = 0.25f;
  RopeFrequencies freqs = rope_frequencies(RopeScaling{}, 10000.0f, 16, 4, 4);
  Both in = d->random(dt, 4 * 3 * 16, -1.0f, 1.0f, 74), out = d->poisoned(dt, 4 * 3 * 16);
  for (int bad : {0, 7, 18}) {
    const RopeTable rope{freqs.inv_freq.data(), bad, 1.0f};
    EXPECT_THROW(d->gpu->rope_fwd(in.g, out.g, a, rope), Error) << "rotary_dim " << bad;
  }
}

TEST_P(GpuOps, AdamWOverSegments) {
  const std::int64_t n = 10000;
  std::vector<AdamSegment> segs = {{0, 3000, true}, {3000, 1000, false}, {5000, 5000, true}};
  AdamArgs args;
  args.lr = 3e-3f;
  args.weight_decay = 0.1f;
  args.t = 3;
  Both grads = d->random(dt, n, -1.0f, 1.0f, 80);
  Both m = d->random(DType::F32, n, -0.1f, 0.1f, 81);
  Both v = d->random(DType::F32, n, 0.0f, 0.1f, 82);
  if (dt == DType::BF16) {
    Both master = d->random(DType::F32, n, -1.0f, 1.0f, 83);
    Both params = d->poisoned(dt, n);
    both([&](auto& b, bool c) { b.cast(T(params, c), T(master, c)); });
    both([&](auto& b, bool c) {
      Tensor ms = T(master, c);
      b.adamw(T(params, c), T(grads, c), &ms, T(m, c), T(v, c), segs, args);
    });
    EXPECT_LE(d->rel(master), 1e-6) << "master";
    EXPECT_LE(d->rel(params), tol(dt)) << "params";
  } else {
    Both params = d->random(dt, n, -1.0f, 1.0f, 84);
    both([&](auto& b, bool c) {
      b.adamw(T(params, c), T(grads, c), nullptr, T(m, c), T(v, c), segs, args);
    });
    EXPECT_LE(d->rel(params), 1e-6) << "params";
  }
  EXPECT_LE(d->rel(m), 1e-6) << "m";
  EXPECT_LE(d->rel(v), 1e-6) << "v";
}

// The first step's AdamW (zero_moments: m and v not read) against the same step on zero-filled
// moments, both on the GPU: the same bits in m, v, master and params. The gradients hold signed
// zeros and values whose (1 - beta1) g underflows, where 0 + w1 g and a fused w1 g + 0 differ
// in sign; m and v start as NaN, so a read of either would show.
TEST_P(GpuOps, AdamWOnZeroMomentsWritesWithoutReading) {
  const std::int64_t n = 5000;
  std::vector<AdamSegment> segs = {{0, 3000, true}, {3000, 2000, false}};
  std::vector<float> g = uniform(n, -1.0f, 1.0f, 85);
  for (std::int64_t i = 0; i < n; i += 7) g[static_cast<std::size_t>(i)] = -0.0f;
  for (std::int64_t i = 3; i < n; i += 11) g[static_cast<std::size_t>(i)] = -1e-44f;
  for (std::int64_t i = 5; i < n; i += 13) g[static_cast<std::size_t>(i)] = 0.0f;
  AdamArgs args;
  args.lr = 3e-3f;
  const std::vector<float> p0 = uniform(n, -1.0f, 1.0f, 86);
  std::vector<std::vector<std::uint8_t>> out[2];
  for (int zero = 0; zero < 2; ++zero) {
    args.zero_moments = zero == 1;
    Both grads = d->upload(dt, g), master = d->upload(DType::F32, p0), params = d->upload(dt, p0);
    Both m = d->poisoned(DType::F32, n), v = d->poisoned(DType::F32, n);
    if (!zero) {
      d->gpu->fill_zero(m.g);
      d->gpu->fill_zero(v.g);
    }
    Tensor ms = master.g;
    d->gpu->adamw(params.g, grads.g, dt == DType::BF16 ? &ms : nullptr, m.g, v.g, segs, args);
    d->gpu->synchronize();
    for (const Both* b : {&params, &master, &m, &v}) out[zero].push_back(d->gpu_bytes(b->g));
  }
  const char* names[] = {"params", "master", "m", "v"};
  for (std::size_t t = 0; t < 4; ++t)
    EXPECT_TRUE(out[0][t] == out[1][t]) << names[t] << " differs with zero_moments";
}

TEST_P(GpuOps, FillZeroAndDeviceCopy) {
  const std::int64_t n = 1234;
  Both a = d->random(dt, n, -1.0f, 1.0f, 90);
  Both z = d->poisoned(dt, n);
  both([&](auto& b, bool c) { b.fill_zero(T(z, c)); });
  for (float v : d->gpu_read(z)) ASSERT_EQ(v, 0.0f);
  Both cpy = d->poisoned(dt, n);
  both([&](auto& b, bool c) { b.copy(T(cpy, c), T(a, c)); });
  EXPECT_EQ(d->rel(cpy), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuOps, ::testing::Values(DType::F32, DType::BF16), dtype_name);

}  // namespace
}  // namespace remat::gputest
