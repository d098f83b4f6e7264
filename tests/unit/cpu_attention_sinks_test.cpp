// Attention sinks (gpt-oss's self_attn.sinks) on the CPU: the naive path (AttnSoftmax, then P V)
// and flash attention, forward and backward, against a float64 reference written out here
// (plain loops, Hugging Face's GptOssAttention: the sink is one more softmax column, never
// capped, with no value), over MHA and GQA, windows, soft-caps, dominant and negligible sinks,
// fp32 and bf16, on the SIMD kernels and on the reference loops; the two paths against each
// other, with attention dropout too (the naive path's mask bits); the sink gradient added into
// what dw holds; the same bits whatever the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/unit/cpu_simd_test_util.h"
#include "tests/unit/cpu_test_util.h"

namespace remat::sinks_unit {
namespace {

using cputest::attn_dims;
using cputest::ctx_n;
using cputest::Env;
using cputest::expect_near_all;
using cputest::probs_n;
using cputest::qkv_n;
using cputest::randv;

std::string sink_case(const AttnDims& a, const std::vector<float>& sinks, float p) {
  std::string s = "heads " + std::to_string(a.heads) + "/" + std::to_string(a.kv_heads) + " S " +
                  std::to_string(a.S) + " window " + std::to_string(a.window) + " softcap " +
                  std::to_string(a.softcap) + " p " + std::to_string(p) + " sinks";
  for (float x : sinks) s += " " + std::to_string(x);
  return s;
}

// The float64 reference of softmax (with the sink column) -> dropout -> P V and its backward
// for a given dctx. P holds the probabilities before dropout, as AttnSoftmax stores them.
struct SinkRef {
  std::vector<double> P, ctx, lse, dqkv, dsink;
  std::vector<double> mag;  // per head: sum of p_sink * sum_j P |dP|, the scale of dsink's terms
};

SinkRef sink_reference(const AttnDims& a, const std::vector<float>& qkv,
                       const std::vector<float>& sinks, const std::vector<float>& dctx,
                       const DropoutKey& key, float p) {
  const int S = a.S, d = a.d, dv = a.v_dim();
  const std::int64_t W = a.qkv_width(), C = a.ctx_width();
  const std::uint32_t thr = dropout_threshold(p);
  const double keep = p > 0.0f ? static_cast<double>(1.0f / (1.0f - p)) : 1.0;
  SinkRef r;
  r.P.assign(probs_n(a), 0.0);
  r.ctx.assign(ctx_n(a), 0.0);
  r.lse.assign(static_cast<std::size_t>(a.B) * a.heads * S, 0.0);
  r.dqkv.assign(qkv_n(a), 0.0);
  r.dsink.assign(a.heads, 0.0);
  r.mag.assign(a.heads, 0.0);
  std::vector<double> s(S), t(S), z(S), dp(S);
  for (int b = 0; b < a.B; ++b)
    for (int h = 0; h < a.heads; ++h) {
      const int g = h / a.group();
      const double sink = sinks[h];
      for (int i = 0; i < S; ++i) {
        const int j0 = a.window > 0 ? std::max(0, i - a.window + 1) : 0;
        const std::int64_t q = (static_cast<std::int64_t>(b) * S + i) * W + h * d;
        auto kcol = [&](int j) {
          return (static_cast<std::int64_t>(b) * S + j) * W + (a.heads + g) * d;
        };
        auto vcol = [&](int j) {
          return (static_cast<std::int64_t>(b) * S + j) * W +
                 static_cast<std::int64_t>(a.heads + a.kv_heads) * d + g * dv;
        };
        double m = sink;
        for (int j = j0; j <= i; ++j) {
          double raw = 0;
          for (int c = 0; c < d; ++c) raw += static_cast<double>(qkv[q + c]) * qkv[kcol(j) + c];
          raw *= a.scale;
          t[j] = a.softcap > 0 ? std::tanh(raw / a.softcap) : 0.0;
          s[j] = a.softcap > 0 ? a.softcap * t[j] : raw;
          m = std::max(m, s[j]);
        }
        double Z = std::exp(sink - m);
        for (int j = j0; j <= i; ++j) Z += std::exp(s[j] - m);
        const double ps = std::exp(sink - m) / Z;
        const std::int64_t pr = ((static_cast<std::int64_t>(b) * a.heads + h) * S + i) * S;
        r.lse[(static_cast<std::size_t>(b) * a.heads + h) * S + i] = m + std::log(Z);
        const std::int64_t cr = (static_cast<std::int64_t>(b) * S + i) * C + h * dv;
        double rs = 0, ra = 0;
        for (int j = j0; j <= i; ++j) {
          const double P = std::exp(s[j] - m) / Z;
          r.P[pr + j] = P;
          z[j] = p > 0.0f
                     ? (philox_bits(key, static_cast<std::uint64_t>(pr + j)) >= thr ? keep : 0.0)
                     : 1.0;
          double go_v = 0;
          for (int c = 0; c < dv; ++c) {
            r.ctx[cr + c] += P * z[j] * qkv[vcol(j) + c];
            go_v += static_cast<double>(dctx[cr + c]) * qkv[vcol(j) + c];
          }
          dp[j] = z[j] * go_v;
          rs += P * dp[j];
          ra += P * std::fabs(dp[j]);
        }
        r.dsink[h] -= ps * rs;
        r.mag[h] += ps * ra;
        for (int j = j0; j <= i; ++j) {
          const double P = r.P[pr + j];
          double ds = P * (dp[j] - rs);
          if (a.softcap > 0) ds *= 1.0 - t[j] * t[j];
          ds *= a.scale;
          for (int c = 0; c < d; ++c) {
            r.dqkv[q + c] += ds * qkv[kcol(j) + c];
            r.dqkv[kcol(j) + c] += ds * qkv[q + c];
          }
          for (int c = 0; c < dv; ++c) r.dqkv[vcol(j) + c] += P * z[j] * dctx[cr + c];
        }
      }
    }
  return r;
}

struct SinkRun {
  std::vector<float> P, ctx, lse, dqkv, dsink;
};

// The naive chain: AttnSoftmax, AttnDropout (p > 0), AttnPV and their backward. sinks null: none.
SinkRun naive_run(Env& e, const AttnDims& a, DType dt, const std::vector<float>& qkv,
                  const std::vector<float>* sinks, const std::vector<float>& dctx,
                  const std::vector<float>& dw0, const DropoutKey& key, float p) {
  const std::int64_t np = probs_n(a);
  Tensor tq = e.from(qkv, dt), tp = e.make(dt, np), tc = e.make(dt, ctx_n(a));
  Tensor ts = e.from(sinks ? *sinks : dw0, dt), tdw = e.from(dw0, dt);
  const Tensor* sk = sinks ? &ts : nullptr;
  Tensor mask = e.make(DType::U8, np), td = e.make(dt, np);
  e.be.attn_softmax_fwd(tq, tp, a, sk);
  Tensor pv_in = tp;
  if (p > 0) {
    e.be.dropout_mask(mask, key, p, np);
    e.be.dropout_fwd(tp, mask, td, p, np);
    pv_in = td;
  }
  e.be.attn_pv_fwd(pv_in, tq, tc, a);
  Tensor tdc = e.from(dctx, dt), tdq = e.make(dt, qkv_n(a)), tdd = e.make(dt, np),
         tdp = e.make(dt, np);
  e.be.attn_pv_bwd(pv_in, tq, tdc, p > 0 ? tdd : tdp, tdq, a, false);
  if (p > 0) e.be.dropout_bwd(tdd, mask, tdp, p, np, false);
  e.be.attn_softmax_bwd(tq, tp, tdp, tdq, a, sk, sinks ? &tdw : nullptr);
  return {e.get(tp), e.get(tc), {}, e.get(tdq), e.get(tdw)};
}

SinkRun flash_run(Env& e, const AttnDims& a, DType dt, const std::vector<float>& qkv,
                  const std::vector<float>* sinks, const std::vector<float>& dctx,
                  const std::vector<float>& dw0, const DropoutKey& key, float p) {
  Tensor tq = e.from(qkv, dt), tc = e.make(dt, ctx_n(a)),
         tl = e.make(DType::F32, static_cast<std::int64_t>(a.B) * a.heads * a.S);
  Tensor ts = e.from(sinks ? *sinks : dw0, dt), tdw = e.from(dw0, dt);
  const Tensor* sk = sinks ? &ts : nullptr;
  e.be.flash_fwd(tq, tc, tl, a, key, p, sk);
  Tensor tdc = e.from(dctx, dt), tdq = e.make(dt, qkv_n(a));
  e.be.flash_bwd(tq, tc, tl, tdc, tdq, a, key, p, sk, sinks ? &tdw : nullptr);
  return {{}, e.get(tc), e.get(tl), e.get(tdq), e.get(tdw)};
}

// dsink (got - dw0) against want, at tol times the scale of its terms.
void expect_dsink(const char* what, const std::vector<float>& got, const std::vector<float>& dw0,
                  const SinkRef& r, double tol) {
  ASSERT_EQ(got.size(), r.dsink.size());
  for (std::size_t h = 0; h < got.size(); ++h) {
    const double g = static_cast<double>(got[h]) - dw0[h];
    EXPECT_LE(std::fabs(g - r.dsink[h]), tol * r.mag[h] + 1e-7 * std::fabs(dw0[h]) + 1e-37)
        << what << " head " << h << ": got " << g << ", want " << r.dsink[h] << " (scale "
        << r.mag[h] << ")";
  }
}

// Tolerances: P, ctx (absolute, relative), lse, dqkv (absolute, relative), and dsink as a
// multiple of the scale of its terms (fp32: at most about 2e-7 seen; bf16: the stored P, dP,
// ctx and dsink rounded to 8 bits).
struct Tol {
  double p, ctx_a, ctx_r, lse, dq_a, dq_r, dsink;
};
const Tol kF32{1e-6, 2e-6, 1e-5, 2e-5, 1e-5, 1e-4, 1e-6};
const Tol kBf16{4e-3, 2e-2, 2e-2, 2e-2, 4e-2, 4e-2, 5e-2};

// Both paths against the reference on one case, at dtype dt.
void both_paths_match_reference(const AttnDims& a, DType dt, const std::vector<float>& sinks_in,
                                float p = 0.0f, std::uint32_t seed = 7) {
  const bool bf = dt == DType::BF16;
  const Tol& tol = bf ? kBf16 : kF32;
  auto qkv = cputest::bf16v(randv(qkv_n(a), seed, -2, 2));
  auto dctx = cputest::bf16v(randv(ctx_n(a), seed + 1));
  auto sinks = cputest::bf16v(sinks_in);
  std::vector<float> dw0(a.heads, 0.0f);
  SCOPED_TRACE(sink_case(a, sinks, p) + (bf ? " bf16" : " fp32"));
  const DropoutKey key{77, 3, 1, kSiteAttentionProbs};
  const SinkRef r = sink_reference(a, qkv, sinks, dctx, key, p);
  Env e;
  const SinkRun n = naive_run(e, a, dt, qkv, &sinks, dctx, dw0, key, p);
  expect_near_all("naive P", n.P, r.P, tol.p, 0.0);
  expect_near_all("naive ctx", n.ctx, r.ctx, tol.ctx_a, tol.ctx_r);
  expect_near_all("naive dqkv", n.dqkv, r.dqkv, tol.dq_a, tol.dq_r);
  expect_dsink("naive dsink", n.dsink, dw0, r, tol.dsink);
  const SinkRun f = flash_run(e, a, dt, qkv, &sinks, dctx, dw0, key, p);
  expect_near_all("flash ctx", f.ctx, r.ctx, tol.ctx_a, tol.ctx_r);
  expect_near_all("flash lse", f.lse, r.lse, tol.lse, 0.0);
  expect_near_all("flash dqkv", f.dqkv, r.dqkv, tol.dq_a, tol.dq_r);
  expect_dsink("flash dsink", f.dsink, dw0, r, tol.dsink);
}

// Sinks of mixed sizes, one dominating (+8: most of every row's weight) and one negligible
// (-30: below fp32's resolution of the keys' weights), and all of either.
std::vector<std::vector<float>> sink_sets(int heads) {
  std::vector<std::vector<float>> v;
  std::vector<float> mixed = {0.7f, 8.0f, -30.0f, -1.3f};
  mixed.resize(heads, 0.25f);
  v.push_back(mixed);
  v.push_back(std::vector<float>(heads, 8.0f));
  v.push_back(std::vector<float>(heads, -30.0f));
  return v;
}

// The kernel sets to run on: the reference loops, and the first SIMD set when there is one.
std::vector<const cpu::simd::Kernels*> kernel_sets() {
  std::vector<const cpu::simd::Kernels*> sets = {nullptr};
  if (!cpu::simd::available().empty()) sets.push_back(cpu::simd::available().front());
  return sets;
}

// MHA and GQA; causal, a window inside the row (3) and one across the GEMM block and the flash
// tile (70 of S = 75); soft-capped and not.
std::vector<AttnDims> sink_cases() {
  std::vector<AttnDims> v;
  for (int kv : {4, 2})
    for (float cap : {0.0f, 1.5f}) {
      v.push_back(attn_dims(2, 9, 4, kv, 8, 0, cap));
      v.push_back(attn_dims(2, 9, 4, kv, 8, 3, cap));
    }
  v.push_back(attn_dims(1, 75, 4, 2, 8, 70, 0.0f));
  v.push_back(attn_dims(1, 75, 4, 1, 8, 0, 2.0f));
  return v;
}

TEST(CpuAttentionSinks, BothPathsMatchFloat64Reference) {
  simdtest::ActiveGuard guard;
  for (const cpu::simd::Kernels* k : kernel_sets()) {
    cpu::simd::set_active(k);
    SCOPED_TRACE(k ? "simd" : "reference loops");
    for (const AttnDims& a : sink_cases())
      for (const auto& s : sink_sets(a.heads)) both_paths_match_reference(a, DType::F32, s);
  }
}

TEST(CpuAttentionSinks, Bf16MatchesFloat64ReferenceLoosely) {
  simdtest::ActiveGuard guard;
  for (const cpu::simd::Kernels* k : kernel_sets()) {
    cpu::simd::set_active(k);
    SCOPED_TRACE(k ? "simd" : "reference loops");
    for (const AttnDims& a : {attn_dims(2, 9, 4, 2, 8, 0, 0.0f), attn_dims(2, 9, 4, 4, 8, 3, 1.5f),
                              attn_dims(1, 75, 4, 2, 8, 70, 0.0f)})
      for (const auto& s : sink_sets(a.heads)) both_paths_match_reference(a, DType::BF16, s);
  }
}

// Attention dropout: flash's own mask bits are the naive path's (AttnDropout's mask), and both
// agree with the reference, which drops by the bit index of backend.h.
TEST(CpuAttentionSinks, DropoutMatchesReferenceOnBothPaths) {
  simdtest::ActiveGuard guard;
  for (const cpu::simd::Kernels* k : kernel_sets()) {
    cpu::simd::set_active(k);
    SCOPED_TRACE(k ? "simd" : "reference loops");
    for (const AttnDims& a :
         {attn_dims(2, 9, 4, 2, 8, 0, 0.0f), attn_dims(1, 75, 4, 2, 8, 70, 1.5f)})
      both_paths_match_reference(a, DType::F32, {0.5f, 8.0f, -30.0f, -2.0f}, 0.25f);
  }
}

// Naive and flash with each other over three flash tiles (S = 150), GQA and MHA, a window ending
// inside a tile and a cap, with and without dropout.
TEST(CpuAttentionSinks, FlashAgreesWithNaive) {
  for (int kv : {2, 4})
    for (float p : {0.0f, 0.2f})
      for (const AttnDims& a :
           {attn_dims(2, 150, 4, kv, 16), attn_dims(2, 150, 4, kv, 16, 97, 1.5f)}) {
        Env e;
        const std::vector<float> sinks = {1.0f, -0.5f, 8.0f, -30.0f}, dw0(4, 0.0f);
        SCOPED_TRACE(sink_case(a, sinks, p));
        const DropoutKey key{1234, 7, 3, kSiteAttentionProbs};
        auto qkv = randv(qkv_n(a), 41 + kv, -2, 2), dctx = randv(ctx_n(a), 42);
        const SinkRun n = naive_run(e, a, DType::F32, qkv, &sinks, dctx, dw0, key, p);
        const SinkRun f = flash_run(e, a, DType::F32, qkv, &sinks, dctx, dw0, key, p);
        expect_near_all("ctx", f.ctx, n.ctx, 2e-6, 1e-4);
        expect_near_all("dqkv", f.dqkv, n.dqkv, 2e-5, 1e-3);
        for (int h = 0; h < a.heads; ++h)
          EXPECT_NEAR(f.dsink[h], n.dsink[h], 1e-5 * std::fabs(n.dsink[h]) + 1e-6) << "head " << h;
      }
}

// The sink's gradient is added into what dw holds: the result with dw0 is that with zeros plus
// dw0, rounded once (exactly so in fp32).
TEST(CpuAttentionSinks, GradientAccumulatesIntoDw) {
  const AttnDims a = attn_dims(2, 9, 4, 2, 8, 3, 0.0f);
  const std::vector<float> sinks = {0.5f, -1.0f, 2.0f, 0.0f}, zero(4, 0.0f),
                           dw0 = {0.75f, -3.0f, 1.5f, 100.0f};
  auto qkv = randv(qkv_n(a), 51, -2, 2), dctx = randv(ctx_n(a), 52);
  const DropoutKey key{};
  for (bool flash : {false, true}) {
    SCOPED_TRACE(flash ? "flash" : "naive");
    Env e;
    auto run = flash ? flash_run : naive_run;
    const SinkRun r0 = run(e, a, DType::F32, qkv, &sinks, dctx, zero, key, 0.0f);
    const SinkRun r1 = run(e, a, DType::F32, qkv, &sinks, dctx, dw0, key, 0.0f);
    for (int h = 0; h < a.heads; ++h) {
      EXPECT_NE(r0.dsink[h], 0.0f) << "head " << h;
      EXPECT_EQ(r1.dsink[h], dw0[h] + r0.dsink[h]) << "head " << h;
    }
    EXPECT_EQ(r0.dqkv, r1.dqkv);
  }
}

// A sink of 0 still takes exp(0 - m) of every row's weight: it is not the absence of a sink.
TEST(CpuAttentionSinks, ZeroSinkIsNotNoSink) {
  const AttnDims a = attn_dims(2, 9, 4, 2, 8);
  const std::vector<float> sinks(4, 0.0f), dw0(4, 0.0f);
  auto qkv = randv(qkv_n(a), 61, -2, 2), dctx = randv(ctx_n(a), 62);
  for (bool flash : {false, true}) {
    SCOPED_TRACE(flash ? "flash" : "naive");
    Env e;
    auto run = flash ? flash_run : naive_run;
    const SinkRun with = run(e, a, DType::F32, qkv, &sinks, dctx, dw0, DropoutKey{}, 0.0f);
    const SinkRun without = run(e, a, DType::F32, qkv, nullptr, dctx, dw0, DropoutKey{}, 0.0f);
    double diff = 0;
    for (std::size_t i = 0; i < with.ctx.size(); ++i)
      diff += std::fabs(with.ctx[i] - without.ctx[i]);
    EXPECT_GT(diff, 1.0);
    // Without sinks the gradient buffer is left alone.
    EXPECT_EQ(without.dsink, dw0);
    if (!flash) {
      // Row sums of P: 1 without a sink, less with one (by exp(-m) / Z, m the row's max).
      double deficit = 0;
      for (int i = 0; i < a.S; ++i) {
        double sw = 0, so = 0;
        for (int j = 0; j <= i; ++j) sw += with.P[i * a.S + j], so += without.P[i * a.S + j];
        EXPECT_NEAR(so, 1.0, 1e-5);
        EXPECT_LE(sw, so);
        deficit += so - sw;
      }
      EXPECT_GT(deficit, 0.1);
    }
  }
}

// The same bits on one thread and on three, and again on a second run (the sink gradient's sum
// is in a fixed order); the op table's entry points pass args.w and args.dw through.
TEST(CpuAttentionSinks, BitwiseRepeatableAcrossThreadCountsAndThroughTheOpTable) {
  const AttnDims a = attn_dims(3, 70, 4, 2, 8, 0, 0.0f);
  const std::vector<float> sinks = {0.5f, -1.0f, 8.0f, -30.0f}, dw0(4, 0.125f);
  auto qkv = randv(qkv_n(a), 71, -2, 2), dctx = randv(ctx_n(a), 72);
  const DropoutKey key{5, 1, 0, kSiteAttentionProbs};
  for (bool flash : {false, true}) {
    SCOPED_TRACE(flash ? "flash" : "naive");
    auto run = flash ? flash_run : naive_run;
    Env e1(1), e3(3);
    const SinkRun r1 = run(e1, a, DType::F32, qkv, &sinks, dctx, dw0, key, 0.1f);
    const SinkRun r3 = run(e3, a, DType::F32, qkv, &sinks, dctx, dw0, key, 0.1f);
    const SinkRun r3b = run(e3, a, DType::F32, qkv, &sinks, dctx, dw0, key, 0.1f);
    EXPECT_EQ(r1.ctx, r3.ctx);
    EXPECT_EQ(r1.dqkv, r3.dqkv);
    EXPECT_EQ(r1.dsink, r3.dsink);
    EXPECT_EQ(r3.dsink, r3b.dsink);
    EXPECT_EQ(r3.dqkv, r3b.dqkv);
  }
  // Through Backend::run: the forward's output and the backward's gradients equal the direct
  // calls'.
  Env e;
  Tensor tq = e.from(qkv), ts = e.from(sinks), tdw = e.from(dw0), tdc = e.from(dctx);
  Tensor tc = e.make(DType::F32, ctx_n(a)),
         tl = e.make(DType::F32, static_cast<std::int64_t>(a.B) * a.heads * a.S);
  Tensor tdq = e.make(DType::F32, qkv_n(a));
  OpArgs args;
  args.in[0] = &tq;
  args.out[0] = &tc;
  args.out[1] = &tl;
  args.dout[0] = &tdc;
  args.din[0] = &tdq;
  args.w = &ts;
  args.dw = &tdw;
  args.attn = a;
  args.key = key;
  args.p = 0.1f;
  e.be.run(OpKind::FlashAttn, Pass::Forward, args);
  e.be.run(OpKind::FlashAttn, Pass::Backward, args);
  const SinkRun f = flash_run(e, a, DType::F32, qkv, &sinks, dctx, dw0, key, 0.1f);
  EXPECT_EQ(e.get(tc), f.ctx);
  EXPECT_EQ(e.get(tdq), f.dqkv);
  EXPECT_EQ(e.get(tdw), f.dsink);
  Tensor tp = e.make(DType::F32, probs_n(a)), tdp = e.from(randv(probs_n(a), 73)),
         tdq2 = e.make(DType::F32, qkv_n(a)), tdw2 = e.from(dw0);
  OpArgs sm;
  sm.in[0] = &tq;
  sm.out[0] = &tp;
  sm.dout[0] = &tdp;
  sm.din[0] = &tdq2;
  sm.w = &ts;
  sm.dw = &tdw2;
  sm.attn = a;
  e.be.run(OpKind::AttnSoftmax, Pass::Forward, sm);
  e.be.run(OpKind::AttnSoftmax, Pass::Backward, sm);
  Tensor tp2 = e.make(DType::F32, probs_n(a)), tdq3 = e.make(DType::F32, qkv_n(a)),
         tdw3 = e.from(dw0);
  e.be.attn_softmax_fwd(tq, tp2, a, &ts);
  e.be.attn_softmax_bwd(tq, tp2, tdp, tdq3, a, &ts, &tdw3);
  EXPECT_EQ(e.get(tp), e.get(tp2));
  EXPECT_EQ(e.get(tdq2), e.get(tdq3));
  EXPECT_EQ(e.get(tdw2), e.get(tdw3));
  EXPECT_NE(e.get(tdw2), dw0);
}

TEST(CpuAttentionSinks, BackwardWithoutTheGradientIsRefused) {
  const AttnDims a = attn_dims(1, 4, 2, 2, 4);
  Env e;
  Tensor tq = e.from(randv(qkv_n(a), 81)), ts = e.from({0.0f, 1.0f}),
         tp = e.make(DType::F32, probs_n(a));
  Tensor tdp = e.make(DType::F32, probs_n(a)), tdq = e.make(DType::F32, qkv_n(a)),
         small = e.make(DType::F32, 1);
  EXPECT_THROW(e.be.attn_softmax_bwd(tq, tp, tdp, tdq, a, &ts, nullptr), Error);
  EXPECT_THROW(e.be.attn_softmax_fwd(tq, tp, a, &small), Error);  // one sink per head
}

}  // namespace
}  // namespace remat::sinks_unit
