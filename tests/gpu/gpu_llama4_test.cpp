// Llama 4's ops on CUDA against their CPU twins through the Backend interface, on the same bytes
// (outputs poisoned first): RoPE in the complex form (adjacent pairs), the temperature on q, the
// per-head QK-norm without weights, and the experts' permute and unpermute when the router's
// weights scale the experts' input (its gradient included). Chunked attention runs in the
// attention tests' cases (gpu_attention_test.cpp). Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>

#include "core/model/rope_scaling.h"
#include "tests/gpu/gpu_test_util.h"

namespace remat::gputest {
namespace {

class GpuLlama4 : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    REMAT_REQUIRE_GPU();
    d = std::make_unique<Dual>();
    dt = GetParam();
  }
  template <class F>
  void both(F&& f) {
    f(d->cpu, true);
    f(*d->gpu, false);
  }
  std::unique_ptr<Dual> d;
  DType dt = DType::F32;
};

#define T(b, is_cpu) ((is_cpu) ? (b).c : (b).g)

AttnDims dims() {
  AttnDims a;
  a.B = 2, a.S = 37, a.heads = 4, a.kv_heads = 2, a.d = 32;
  a.scale = 1.0f / std::sqrt(32.0f);
  return a;
}

TEST_P(GpuLlama4, InterleavedRopeAndTheTemperature) {
  const AttnDims a = dims();
  const std::int64_t n = static_cast<std::int64_t>(a.B) * a.S * a.qkv_width();
  const RopeFrequencies freqs = rope_frequencies(RopeScaling{}, 500000.0f, a.d, a.S, a.S);
  RopeTable pairs{freqs.inv_freq.data(), a.d, 1.0f};
  pairs.interleaved = true;
  RopeTable temp;
  temp.temp_floor = 4;  // positions 3 on scaled
  temp.temp_scale = 0.5f;
  for (const RopeTable& r : {pairs, temp}) {
    const char* what = r.temp_floor ? "temperature" : "interleaved rope";
    Both in = d->random(dt, n, -1.0f, 1.0f, 80), out = d->poisoned(dt, n);
    both([&](auto& b, bool c) { b.rope_fwd(T(in, c), T(out, c), a, r); });
    EXPECT_LE(d->rel(out), tol(dt)) << what;
    for (bool acc : {false, true}) {
      Both din = acc ? d->random(dt, n, -1.0f, 1.0f, 81) : d->poisoned(dt, n);
      both([&](auto& b, bool c) { b.rope_bwd(T(out, c), T(din, c), a, r, acc); });
      EXPECT_LE(d->rel(din), tol(dt)) << what << " backward acc=" << acc;
    }
  }
}

TEST_P(GpuLlama4, QkHeadNormWithoutWeights) {
  const std::int64_t rows = 45;
  const int hd = 32, K = 4 * hd, N = 2 * hd;
  const std::int64_t n = rows * (K + 2 * N);
  Both x = d->random(dt, n, -2.0f, 2.0f, 90), y = d->poisoned(dt, n), dy = d->random(dt, n, -1.0f, 1.0f, 91);
  auto args = [&](bool c) {
    OpArgs a;
    a.in[0] = &T(x, c);
    a.M = rows, a.K = K, a.N = N, a.eps = 1e-5f;
    a.attn.d = hd;
    return a;
  };
  both([&](auto& b, bool c) {
    OpArgs a = args(c);
    a.out[0] = &T(y, c);
    b.run(OpKind::QkHeadNorm, Pass::Forward, a);
  });
  EXPECT_LE(d->rel(y), tol(dt)) << "forward";
  for (bool acc : {false, true}) {
    Both dx = acc ? d->random(dt, n, -1.0f, 1.0f, 92) : d->poisoned(dt, n);
    both([&](auto& b, bool c) {
      OpArgs a = args(c);
      a.dout[0] = &T(dy, c), a.din[0] = &T(dx, c), a.acc[0] = acc;
      b.run(OpKind::QkHeadNorm, Pass::Backward, a);
    });
    EXPECT_LE(d->rel(dx), tol(dt)) << "backward acc=" << acc;
  }
}

TEST_P(GpuLlama4, ExpertsWeightedOnTheirInput) {
  for (std::int64_t capacity : {0, 20}) {
    SCOPED_TRACE(capacity);
    MoeDims m;
    m.experts = 8, m.top_k = 2, m.tokens = 96, m.capacity = capacity, m.sigmoid = true, m.weight_input = true;
    const int H = 64;
    const std::int64_t T_ = m.tokens, R = m.rows(), n = T_ * m.top_k;
    Both x = d->random(dt, T_ * H, -1, 1, 1), logits = d->random(dt, T_ * m.experts, -2, 2, 2);
    Both w = d->poisoned(dt, n), routing = d->alloc(DType::I32, 2 * n + 2 * m.experts), xp = d->poisoned(dt, R * H),
         y = d->poisoned(dt, T_ * H);
    both([&](auto& b, bool c) {
      OpArgs a;
      a.moe = m, a.in[0] = &T(logits, c), a.out[0] = &T(w, c), a.out[1] = &T(routing, c);
      a.M = T_, a.K = m.top_k, a.N = m.experts;
      b.run(OpKind::MoeRoute, Pass::Forward, a);
      a = OpArgs{};
      a.moe = m, a.in[0] = &T(x, c), a.in[1] = &T(routing, c), a.in[2] = &T(w, c), a.out[0] = &T(xp, c), a.K = H;
      b.run(OpKind::MoePermute, Pass::Forward, a);
      a = OpArgs{};  // the permuted rows straight back: an unweighted sum
      a.moe = m, a.in[0] = &T(xp, c), a.in[1] = &T(w, c), a.in[2] = &T(routing, c), a.out[0] = &T(y, c), a.K = H;
      b.run(OpKind::MoeUnpermute, Pass::Forward, a);
    });
    EXPECT_LE(d->rel(xp), tol(dt)) << "permute";
    EXPECT_LE(d->rel(y), tol(dt)) << "unpermute";
    Both dy = d->random(dt, T_ * H, -1, 1, 3), dyp = d->poisoned(dt, R * H), dw_un = d->poisoned(dt, n),
         dx = d->poisoned(dt, T_ * H), dw = d->poisoned(dt, n);
    both([&](auto& b, bool c) {
      OpArgs a;
      a.moe = m, a.in[0] = &T(xp, c), a.in[1] = &T(w, c), a.in[2] = &T(routing, c), a.dout[0] = &T(dy, c);
      a.din[0] = &T(dyp, c), a.din[1] = &T(dw_un, c), a.K = H;
      b.run(OpKind::MoeUnpermute, Pass::Backward, a);
      a = OpArgs{};
      a.moe = m, a.in[0] = &T(x, c), a.in[1] = &T(routing, c), a.in[2] = &T(w, c), a.dout[0] = &T(dyp, c);
      a.din[0] = &T(dx, c), a.din[2] = &T(dw, c), a.K = H;
      b.run(OpKind::MoePermute, Pass::Backward, a);
    });
    for (float v : d->gpu_read(dw_un)) ASSERT_EQ(v, 0.0f) << "the unweighted sum gives the weights no gradient";
    EXPECT_LE(d->rel(dyp), tol(dt)) << "unpermute backward";
    EXPECT_LE(d->rel(dx), tol(dt)) << "permute backward dx";
    EXPECT_LE(d->rel(dw), tol(dt)) << "permute backward dweights";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuLlama4, ::testing::Values(DType::F32, DType::BF16),
                         [](const ::testing::TestParamInfo<DType>& i) { return i.param == DType::BF16 ? "bf16" : "fp32"; });

}  // namespace
}  // namespace remat::gputest
