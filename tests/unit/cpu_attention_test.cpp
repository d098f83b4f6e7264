// CPU attention: causal probabilities, naive and flash backward against finite differences, and
// flash against naive (ctx and every part of dqkv) with and without dropout, with GQA; the same
// under sliding windows (banded masks) and soft-capped scores.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "tests/unit/cpu_simd_test_util.h"
#include "tests/unit/cpu_test_util.h"

namespace remat {
namespace {

using cputest::Env;
using cputest::dotd;
using cputest::expect_grad;
using cputest::expect_near_all;
using cputest::randv;
using cputest::attn_dims;
using cputest::ctx_n;
using cputest::probs_n;
using cputest::qkv_n;

std::string describe(const AttnDims& a) {
  return "window " + std::to_string(a.window) + " chunk " + std::to_string(a.chunk) + " softcap " + std::to_string(a.softcap) + " dv " + std::to_string(a.dv);
}

// Double-precision causal softmax(softcap(Q K^T * scale)) row over keys 0..i (0 outside the
// window or the chunk, which is written out here, not taken from AttnDims::first_key), and its
// log-sum-exp.
std::vector<double> ref_probs(const std::vector<float>& qkv, const AttnDims& a, int b, int h,
                              int i, double* lse) {
  const int width = static_cast<int>(a.qkv_width()), g = h / a.group();
  std::vector<double> s(i + 1, 0.0);
  const int j0 = a.window > 0 ? std::max(0, i - a.window + 1) : a.chunk > 0 ? i - i % a.chunk : 0;
  double mx = -1e300;
  for (int j = j0; j <= i; ++j) {
    double dot = 0;
    for (int c = 0; c < a.d; ++c)
      dot += static_cast<double>(qkv[(b * a.S + i) * width + h * a.d + c]) *
             qkv[(b * a.S + j) * width + (a.heads + g) * a.d + c];
    s[j] = dot * a.scale;
    if (a.softcap > 0) s[j] = a.softcap * std::tanh(s[j] / a.softcap);
    mx = std::max(mx, s[j]);
  }
  double sum = 0;
  for (int j = j0; j <= i; ++j) sum += (s[j] = std::exp(s[j] - mx));
  for (int j = j0; j <= i; ++j) s[j] /= sum;
  if (lse) *lse = mx + std::log(sum);
  return s;
}

void softmax_matches_reference(int window, float softcap) {
  for (DType dt : {DType::F32, DType::BF16}) {
    Env e;
    AttnDims a = attn_dims(2, 9, 4, 2, 8, window, softcap);
    SCOPED_TRACE(describe(a));
    auto qkv = cputest::bf16v(randv(qkv_n(a), 101, -2, 2));
    Tensor tq = e.from(qkv, dt), tp = e.make(dt, probs_n(a));
    std::memset(tp.data, 0xFF, tp.bytes());  // NaN everywhere: every entry must be written
    e.be.attn_softmax_fwd(tq, tp, a);
    auto p = e.get(tp);
    for (int b = 0; b < a.B; ++b)
      for (int h = 0; h < a.heads; ++h)
        for (int i = 0; i < a.S; ++i) {
          const std::int64_t row = ((static_cast<std::int64_t>(b) * a.heads + h) * a.S + i) * a.S;
          auto want = ref_probs(qkv, a, b, h, i, nullptr);
          double sum = 0;
          const int j0 = window > 0 ? std::max(0, i - window + 1) : window < 0 ? i - i % -window : 0;
          for (int j = 0; j < a.S; ++j) {
            if (j > i || j < j0) {
              std::uint32_t bits;
              std::memcpy(&bits, &p[row + j], 4);
              EXPECT_EQ(bits, 0u) << "masked entry " << i << "," << j << " is not exactly 0";
            } else {
              EXPECT_NEAR(p[row + j], want[j], dt == DType::F32 ? 1e-6 : 4e-3);
              sum += p[row + j];
            }
          }
          EXPECT_NEAR(sum, 1.0, dt == DType::F32 ? 1e-5 : 2e-2);
        }
  }
}

TEST(CpuAttention, SoftmaxIsCausalAndMatchesReference) { softmax_matches_reference(0, 0.0f); }

// Windows of one key, of a few keys, of S - 1 keys and of S (plain causal), and chunks (negative
// here) of one token, of a few (4 leaves a shorter last chunk) and of S, with and without
// soft-capping (a cap of 0.5 saturates tanh on these scores).
TEST(CpuAttention, BandedAndSoftCappedSoftmaxMatchesReference) {
  for (int w : {1, 3, 8, 9, -1, -3, -4, -9})
    for (float cap : {0.0f, 0.5f, 50.0f}) softmax_matches_reference(w, cap);
}

// softmax -> P V chain: loss = sum(R * ctx); gradients for all of q, k and v.
void naive_backward_matches_finite_differences(const AttnDims& a) {
  SCOPED_TRACE(describe(a));
  Env e;
  auto qkv = randv(qkv_n(a), 111, -1.5f, 1.5f), R = randv(ctx_n(a), 112);
  Tensor tq = e.from(qkv), tp = e.make(DType::F32, probs_n(a)), tc = e.make(DType::F32, ctx_n(a));
  auto loss = [&] {
    e.set(tq, qkv);
    e.be.attn_softmax_fwd(tq, tp, a);
    e.be.attn_pv_fwd(tp, tq, tc, a);
    return dotd(e.get(tc), R);
  };
  loss();
  Tensor tR = e.from(R), tdp = e.from(randv(probs_n(a), 113)), tdq = e.make(DType::F32, qkv_n(a));
  e.be.attn_pv_bwd(tp, tq, tR, tdp, tdq, a, false);
  e.be.attn_softmax_bwd(tq, tp, tdp, tdq, a);
  auto dq = e.get(tdq);
  expect_grad("dqkv", qkv, dq, loss, 1e-2f, 1e-3, 1e-2, 80);
}

TEST(CpuAttention, NaiveBackwardMatchesFiniteDifferencesWithGqa) {
  naive_backward_matches_finite_differences(attn_dims(2, 7, 4, 2, 4));
}

// Windows of one and three keys and chunks of three, with and without a cap of 0.7 (which bends
// these scores), and the cap alone.
std::vector<AttnDims> banded_cases() {
  std::vector<AttnDims> v;
  for (int w : {1, 3, -3})
    for (float cap : {0.0f, 0.7f}) v.push_back(attn_dims(2, 7, 4, 2, 4, w, cap));
  v.push_back(attn_dims(2, 7, 4, 2, 4, 0, 0.7f));
  return v;
}

TEST(CpuAttention, BandedSoftCappedNaiveBackwardMatchesFiniteDifferences) {
  for (const AttnDims& a : banded_cases()) naive_backward_matches_finite_differences(a);
}

TEST(CpuAttention, PvBackwardMatchesFiniteDifferences) {
  Env e;
  AttnDims a = attn_dims(1, 6, 2, 1, 4);
  auto qkv = randv(qkv_n(a), 121), P = randv(probs_n(a), 122, 0, 1), R = randv(ctx_n(a), 123);
  Tensor tq = e.from(qkv), tp = e.from(P), tc = e.make(DType::F32, ctx_n(a));
  auto loss = [&] {
    e.set(tq, qkv), e.set(tp, P);
    e.be.attn_pv_fwd(tp, tq, tc, a);
    return dotd(e.get(tc), R);
  };
  loss();
  auto dp0 = randv(probs_n(a), 124);
  Tensor tR = e.from(R), tdp = e.from(dp0), tdq = e.make(DType::F32, qkv_n(a));
  e.be.attn_pv_bwd(tp, tq, tR, tdp, tdq, a, false);
  auto dp = e.get(tdp), dq = e.get(tdq);
  expect_grad("dp", P, dp, loss, 1e-2f, 1e-4, 1e-3, 72);  // upper triangle: 0 both ways
  expect_grad("dv", qkv, dq, loss, 1e-2f, 1e-4, 1e-3, 96);  // q, k parts stay 0
  // acc_dp adds to what is there.
  Tensor tdp2 = e.from(dp0), tdq2 = e.make(DType::F32, qkv_n(a));
  e.be.attn_pv_bwd(tp, tq, tR, tdp2, tdq2, a, true);
  auto dp2 = e.get(tdp2);
  for (std::size_t i = 0; i < dp2.size(); ++i) EXPECT_NEAR(dp2[i], dp0[i] + dp[i], 1e-6);
}

void flash_backward_matches_finite_differences(const AttnDims& a) {
  SCOPED_TRACE(describe(a));
  for (float p : {0.0f, 0.25f}) {
    Env e;
    DropoutKey key{5, 1, 0, kSiteAttentionProbs};
    auto qkv = randv(qkv_n(a), 131, -1.5f, 1.5f), R = randv(ctx_n(a), 132);
    Tensor tq = e.from(qkv), tc = e.make(DType::F32, ctx_n(a)),
           tl = e.make(DType::F32, static_cast<std::int64_t>(a.B) * a.heads * a.S);
    auto loss = [&] {
      e.set(tq, qkv);
      e.be.flash_fwd(tq, tc, tl, a, key, p);
      return dotd(e.get(tc), R);
    };
    loss();
    // lse is the natural-log log-sum-exp of the scaled scores.
    auto l = e.get(tl);
    for (int b = 0; b < a.B; ++b)
      for (int h = 0; h < a.heads; ++h)
        for (int i = 0; i < a.S; ++i) {
          double want;
          ref_probs(qkv, a, b, h, i, &want);
          EXPECT_NEAR(l[(b * a.heads + h) * a.S + i], want, 1e-5);
        }
    Tensor tR = e.from(R), tdq = e.make(DType::F32, qkv_n(a));
    e.be.flash_bwd(tq, tc, tl, tR, tdq, a, key, p);
    auto dq = e.get(tdq);
    expect_grad(p > 0 ? "dqkv (dropout)" : "dqkv", qkv, dq, loss, 1e-2f, 1e-3, 1e-2, 80);
  }
}

TEST(CpuAttention, FlashBackwardMatchesFiniteDifferences) {
  flash_backward_matches_finite_differences(attn_dims(2, 7, 4, 2, 4));
}

TEST(CpuAttention, BandedSoftCappedFlashBackwardMatchesFiniteDifferences) {
  for (const AttnDims& a : banded_cases()) flash_backward_matches_finite_differences(a);
}

struct AttnRun {
  std::vector<float> ctx, dqkv;
};

AttnRun run_naive(Env& e, const AttnDims& a, const std::vector<float>& qkv,
                  const std::vector<float>& dctx, const DropoutKey& key, float p) {
  Tensor tq = e.from(qkv), tp = e.make(DType::F32, probs_n(a)), tc = e.make(DType::F32, ctx_n(a));
  Tensor mask = e.make(DType::U8, probs_n(a)), td = e.make(DType::F32, probs_n(a));
  e.be.attn_softmax_fwd(tq, tp, a);
  Tensor pv_in = tp;
  if (p > 0) {
    e.be.dropout_mask(mask, key, p, probs_n(a));
    e.be.dropout_fwd(tp, mask, td, p, probs_n(a));
    pv_in = td;
  }
  e.be.attn_pv_fwd(pv_in, tq, tc, a);
  Tensor tdc = e.from(dctx), tdq = e.make(DType::F32, qkv_n(a)),
         tdd = e.make(DType::F32, probs_n(a)), tdp = e.make(DType::F32, probs_n(a));
  e.be.attn_pv_bwd(pv_in, tq, tdc, p > 0 ? tdd : tdp, tdq, a, false);
  if (p > 0) e.be.dropout_bwd(tdd, mask, tdp, p, probs_n(a), false);
  e.be.attn_softmax_bwd(tq, tp, tdp, tdq, a);
  return {e.get(tc), e.get(tdq)};
}

AttnRun run_flash(Env& e, const AttnDims& a, const std::vector<float>& qkv,
                  const std::vector<float>& dctx, const DropoutKey& key, float p) {
  Tensor tq = e.from(qkv), tc = e.make(DType::F32, ctx_n(a)),
         tl = e.make(DType::F32, static_cast<std::int64_t>(a.B) * a.heads * a.S);
  e.be.flash_fwd(tq, tc, tl, a, key, p);
  Tensor tdc = e.from(dctx), tdq = e.make(DType::F32, qkv_n(a));
  e.be.flash_bwd(tq, tc, tl, tdc, tdq, a, key, p);
  return {e.get(tc), e.get(tdq)};
}

void flash_agrees_with_naive(int window, float softcap) {
  // S = 150 spans three key tiles; heads 4 over 2 kv heads (GQA) and plain multi-head.
  for (int kv : {2, 4})
    for (float p : {0.0f, 0.2f}) {
      Env e;
      AttnDims a = attn_dims(2, 150, 4, kv, 16, window, softcap);
      SCOPED_TRACE(describe(a));
      DropoutKey key{1234, 7, 3, kSiteAttentionProbs};
      auto qkv = randv(qkv_n(a), 141 + kv, -2, 2), dctx = randv(ctx_n(a), 142);
      AttnRun n = run_naive(e, a, qkv, dctx, key, p), f = run_flash(e, a, qkv, dctx, key, p);
      SCOPED_TRACE("kv_heads " + std::to_string(kv) + " p " + std::to_string(p));
      expect_near_all("ctx", f.ctx, n.ctx, 2e-6, 1e-4);
      expect_near_all("dqkv", f.dqkv, n.dqkv, 2e-5, 1e-3);
      // Dropout changes the result, so the agreement above is not trivially p-independent.
      if (p > 0) {
        AttnRun f0 = run_flash(e, a, qkv, dctx, key, 0.0f);
        double diff = 0;
        for (std::size_t i = 0; i < f0.ctx.size(); ++i) diff += std::fabs(f0.ctx[i] - f.ctx[i]);
        EXPECT_GT(diff, 1.0);
      }
    }
}

TEST(CpuAttention, FlashAgreesWithNaive) { flash_agrees_with_naive(0, 0.0f); }

// Windows that end inside a key tile and that span more than one; a cap that bites.
TEST(CpuAttention, BandedSoftCappedFlashAgreesWithNaive) {
  flash_agrees_with_naive(70, 0.0f);
  flash_agrees_with_naive(1, 0.0f);
  flash_agrees_with_naive(0, 1.5f);
  flash_agrees_with_naive(97, 1.5f);
}

// Chunks (Llama 4's chunked attention): within one key tile, over one tile exactly, across tiles
// with a shorter last chunk, and with a cap.
TEST(CpuAttention, ChunkedFlashAgreesWithNaive) {
  flash_agrees_with_naive(-5, 0.0f);
  flash_agrees_with_naive(-64, 0.0f);
  flash_agrees_with_naive(-70, 1.5f);
}

// Value heads of their own width (multi-head latent attention: narrower and wider than q and k):
// both paths against finite differences and each other, on the SIMD kernels and on the reference
// loops.
TEST(CpuAttention, ValueHeadsOfTheirOwnWidth) {
  simdtest::ActiveGuard guard;
  std::vector<const cpu::simd::Kernels*> sets = {nullptr};
  if (!cpu::simd::available().empty()) sets.push_back(cpu::simd::available().front());
  for (const cpu::simd::Kernels* k : sets) {
    cpu::simd::set_active(k);
    SCOPED_TRACE(k ? "simd" : "reference loops");
    for (int dv : {2, 7}) {
      AttnDims a = attn_dims(2, 7, 4, 2, 4, dv == 2 ? 3 : 0);
      a.dv = dv;
      naive_backward_matches_finite_differences(a);
      flash_backward_matches_finite_differences(a);
    }
    for (int dv : {6, 24}) {
      Env e;
      AttnDims a = attn_dims(2, 150, 4, 4, 16);
      a.dv = dv;
      SCOPED_TRACE(describe(a));
      DropoutKey key{99, 2, 1, kSiteAttentionProbs};
      auto qkv = randv(qkv_n(a), 151, -2, 2), dctx = randv(ctx_n(a), 152);
      AttnRun n = run_naive(e, a, qkv, dctx, key, 0.1f), f = run_flash(e, a, qkv, dctx, key, 0.1f);
      expect_near_all("ctx", f.ctx, n.ctx, 2e-6, 1e-4);
      expect_near_all("dqkv", f.dqkv, n.dqkv, 2e-5, 1e-3);
    }
  }
}

}  // namespace
}  // namespace remat
