// The naive attention's per-head GEMM path (every kernel set) against its reference loops
// (REMAT_SIMD=scalar), op by op on the same inputs, in fp32 and bf16, with GQA, sliding windows
// and soft-capping, over sequences that span several row blocks: within a stated bound of the
// reference, the same bits for every thread count, and nothing read or written outside the
// causal band. The same for flash attention's GEMM path against its reference loops, with and
// without dropout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "tests/unit/cpu_simd_test_util.h"
#include "tests/unit/cpu_test_util.h"

namespace remat {
namespace {

using cputest::Env;
using cputest::randv;
using cputest::ctx_n;
using cputest::probs_n;
using cputest::qkv_n;
using simdtest::row_ulps;
namespace simd = cpu::simd;

AttnDims dims(int S, int kv, int window, float softcap) {
  AttnDims a;
  a.B = 2, a.S = S, a.heads = 4, a.kv_heads = kv, a.d = 16;
  a.scale = 0.25f;
  a.window = window;
  a.softcap = softcap;
  return a;
}

// Every output of the four ops, each op run on the same inputs: probs of softmax_fwd; dqkv of
// softmax_bwd (added to a random dqkv); ctx of pv_fwd; dp and dqkv of pv_bwd, storing dp and
// adding to it. P and dP are random over the whole [S, S] (outside the band too), so reading an
// entry the reference does not read shows.
struct Outs {
  std::vector<std::vector<float>> v;
};
const char* const kNames[] = {"probs", "softmax dqkv", "ctx", "dp", "pv dqkv", "dp (acc)",
                              "pv dqkv (acc)"};

Outs run_ops(const AttnDims& a, DType dt, int threads) {
  Env e(threads);
  auto qkv = randv(qkv_n(a), 301, -2, 2), dq0 = randv(qkv_n(a), 302);
  auto P = randv(probs_n(a), 303, 0, 0.2f), dP = randv(probs_n(a), 304);
  auto dctx = randv(ctx_n(a), 305);
  Outs o;
  Tensor tq = e.from(qkv, dt), tp = e.make(dt, probs_n(a));
  std::memset(tp.data, 0xFF, tp.bytes());
  e.be.attn_softmax_fwd(tq, tp, a);
  o.v.push_back(e.get(tp));
  Tensor tP = e.from(P, dt), tdP = e.from(dP, dt), tdq = e.from(dq0, dt);
  e.be.attn_softmax_bwd(tq, tP, tdP, tdq, a);
  o.v.push_back(e.get(tdq));
  Tensor tc = e.make(dt, ctx_n(a));
  e.be.attn_pv_fwd(tP, tq, tc, a);
  o.v.push_back(e.get(tc));
  for (bool acc : {false, true}) {
    Tensor tdp = e.from(dP, dt), tdq2 = e.from(dq0, dt), tdc = e.from(dctx, dt);
    e.be.attn_pv_bwd(tP, tq, tdc, tdp, tdq2, a, acc);
    o.v.push_back(e.get(tdp));
    o.v.push_back(e.get(tdq2));
  }
  return o;
}

std::string describe(const AttnDims& a, DType dt) {
  return std::string(dt == DType::BF16 ? "bf16" : "fp32") + " S " + std::to_string(a.S) +
         " kv " + std::to_string(a.kv_heads) + " window " + std::to_string(a.window) +
         " softcap " + std::to_string(a.softcap);
}

std::vector<AttnDims> cases() {
  std::vector<AttnDims> v;
  for (int S : {5, 64, 150})
    for (int kv : {2, 4}) v.push_back(dims(S, kv, 0, 0.0f));
  v.push_back(dims(150, 2, 70, 0.0f));
  v.push_back(dims(150, 2, 1, 0.0f));
  v.push_back(dims(150, 4, 0, 1.5f));
  v.push_back(dims(150, 2, 97, 1.5f));
  return v;
}

// Bounds, in float epsilons of the largest |reference| of each head's [S, S] (probs, dp) or of
// each row of a head (d values: ctx, dqkv; a lone dot of d products may cancel, so dp is not
// held to its own row): fp32 outputs differ by summation order only (sums of up to S products); bf16
// outputs, stored rounded, by one bf16 ulp (at most 2^-7 of the row's largest, 2^16 epsilons) plus that.
constexpr double kFp32Ulps = 64.0;
constexpr double kBf16Ulps = 65536.0 + 256.0;

TEST(CpuAttentionGemm, EveryKernelSetMatchesTheReferenceLoops) {
  simdtest::ActiveGuard guard;
  ASSERT_FALSE(simd::available().empty()) << "no SIMD set runs on this CPU";
  for (const AttnDims& a : cases())
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(describe(a, dt));
      simd::set_active(nullptr);
      const Outs ref = run_ops(a, dt, 2);
      for (const simd::Kernels* k : simd::available()) {
        SCOPED_TRACE(k->name);
        simd::set_active(k);
        const Outs got = run_ops(a, dt, 2);
        ASSERT_EQ(got.v.size(), ref.v.size());
        for (std::size_t t = 0; t < ref.v.size(); ++t) {
          const int row = (t == 0 || t == 3 || t == 5) ? a.S * a.S : a.d;
          const double u = row_ulps(got.v[t], ref.v[t], row);
          EXPECT_LE(u, dt == DType::BF16 ? kBf16Ulps : kFp32Ulps) << kNames[t];
        }
        // Outside the band: probs exactly 0, a stored dp exactly 0, an accumulated dp untouched.
        auto dP = randv(probs_n(a), 304);
        for (int bh = 0; bh < a.B * a.heads; ++bh)
          for (int i = 0; i < a.S; ++i)
            for (int j = 0; j < a.S; ++j) {
              if (j <= i && j >= a.first_key(i)) continue;
              const std::int64_t at = (static_cast<std::int64_t>(bh) * a.S + i) * a.S + j;
              ASSERT_EQ(got.v[0][at], 0.0f) << "probs " << i << "," << j;
              ASSERT_FALSE(std::signbit(got.v[0][at])) << "probs " << i << "," << j;
              ASSERT_EQ(got.v[3][at], 0.0f) << "dp " << i << "," << j;
              const float want = dt == DType::BF16 ? bf16_to_float(float_to_bf16(dP[at])) : dP[at];
              ASSERT_EQ(got.v[5][at], want) << "dp (acc) " << i << "," << j;
            }
      }
    }
}

TEST(CpuAttentionGemm, SameBitsForEveryThreadCount) {
  simdtest::ActiveGuard guard;
  ASSERT_FALSE(simd::available().empty());
  simd::set_active(simd::available().front());
  for (const AttnDims& a : {dims(150, 2, 0, 0.0f), dims(150, 2, 97, 1.5f)})
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(describe(a, dt));
      const Outs one = run_ops(a, dt, 1);
      for (int threads : {2, 3}) {
        const Outs many = run_ops(a, dt, threads);
        for (std::size_t t = 0; t < one.v.size(); ++t)
          EXPECT_EQ(0, std::memcmp(one.v[t].data(), many.v[t].data(), one.v[t].size() * 4))
              << kNames[t] << " with " << threads << " threads";
      }
    }
}


// Flash attention's ctx, lse and dqkv (added to a random dqkv).
Outs run_flash(const AttnDims& a, DType dt, float p, int threads) {
  Env e(threads);
  auto qkv = randv(qkv_n(a), 311, -2, 2), dq0 = randv(qkv_n(a), 312), dctx = randv(ctx_n(a), 313);
  DropoutKey key{77, 3, 1, kSiteAttentionProbs};
  Tensor tq = e.from(qkv, dt), tc = e.make(dt, ctx_n(a)),
         tl = e.make(DType::F32, static_cast<std::int64_t>(a.B) * a.heads * a.S);
  e.be.flash_fwd(tq, tc, tl, a, key, p);
  Tensor tdc = e.from(dctx, dt), tdq = e.from(dq0, dt);
  e.be.flash_bwd(tq, tc, tl, tdc, tdq, a, key, p);
  Outs o;
  o.v = {e.get(tc), e.get(tl), e.get(tdq)};
  return o;
}

TEST(CpuAttentionGemm, FlashMatchesTheReferenceLoops) {
  simdtest::ActiveGuard guard;
  ASSERT_FALSE(simd::available().empty()) << "no SIMD set runs on this CPU";
  const char* names[] = {"ctx", "lse", "dqkv"};
  for (const AttnDims& a : cases())
    for (DType dt : {DType::F32, DType::BF16})
      for (float p : {0.0f, 0.2f}) {
        SCOPED_TRACE(describe(a, dt) + " p " + std::to_string(p));
        simd::set_active(nullptr);
        const Outs ref = run_flash(a, dt, p, 2);
        for (const simd::Kernels* k : simd::available()) {
          SCOPED_TRACE(k->name);
          simd::set_active(k);
          const Outs got = run_flash(a, dt, p, 2);
          for (std::size_t t = 0; t < ref.v.size(); ++t) {
            // lse is fp32 whatever the dtype; rows of S per head.
            const double u = row_ulps(got.v[t], ref.v[t], t == 1 ? a.S : a.d);
            EXPECT_LE(u, dt == DType::BF16 && t != 1 ? kBf16Ulps : kFp32Ulps) << names[t];
          }
          if (k == simd::available().front())
            for (int threads : {1, 3}) {
              const Outs other = run_flash(a, dt, p, threads);
              for (std::size_t t = 0; t < got.v.size(); ++t)
                EXPECT_EQ(0, std::memcmp(got.v[t].data(), other.v[t].data(), got.v[t].size() * 4))
                    << names[t] << " with " << threads << " threads";
            }
        }
      }
}

}  // namespace
}  // namespace remat
