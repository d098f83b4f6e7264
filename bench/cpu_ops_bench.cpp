// Per-op times of the CPU backend's activation, gated-activation, RoPE, attention and
// dropout-mask ops and the fused head's cross-entropy rows on gpt2-124m's shapes at B1 T128 (128
// rows of 768, the MLP's 3072, 12 heads of 64, a vocabulary of 50257), the scalar reference loops (REMAT_SIMD=scalar) against every SIMD kernel set this CPU runs, in one run.
// A benchmark, not a test: `build/bin/cpu_ops_bench [reps] [threads] [filter]` prints a Markdown
// table (medians of reps calls; ms for the reference and the best set, ×faster for each set) of
// the ops whose name contains filter (all without one).
// bench/gelu_torch.py times PyTorch's GELU on the same shape for the ratio in bench/NOTES.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"
#include "core/backend/cpu/cpu_cross_entropy.h"
#include "core/backend/cpu/cpu_simd.h"
#include "core/graph/op_table.h"
#include "core/model/rope_scaling.h"
#include "core/util/bf16.h"

namespace remat {
namespace {

template <class F>
double median_ms(int reps, F&& f) {
  std::vector<double> v;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    v.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Bench {
  CpuBackend be;
  std::vector<Tensor> owned;
  std::mt19937 rng{5};
  explicit Bench(int threads) : be(threads) {}
  ~Bench() {
    for (const Tensor& t : owned) be.memory(t.space).deallocate(t.data, t.bytes());
  }
  Tensor make(DType dt, std::int64_t n, float lo = -3.0f, float hi = 3.0f) {
    Tensor t;
    t.dtype = dt;
    t.numel = n;
    t.space = Space::Device;
    t.data = be.memory(t.space).allocate(t.bytes());
    std::uniform_real_distribution<float> d(lo, hi);
    for (std::int64_t i = 0; i < n; ++i) {
      if (dt == DType::BF16) t.as<std::uint16_t>()[i] = float_to_bf16(d(rng));
      else if (dt == DType::F32) t.as<float>()[i] = d(rng);
      else static_cast<std::uint8_t*>(t.data)[i] = 0;
    }
    owned.push_back(t);
    return t;
  }
};

OpArgs act(const Tensor* x, const Tensor* y, const Tensor* dy, const Tensor* dx, std::int64_t M, int K) {
  OpArgs a;
  a.in[0] = x;
  a.out[0] = y;
  a.dout[0] = dy;
  a.din[0] = dx;
  a.M = M;
  a.K = K;
  return a;
}

int run(int reps, int threads, const std::string& filter) {
  const std::int64_t T = 128, C = 768, F = 4 * C;
  const int heads = 12, d = 64;
  Bench b(threads);
  Tensor ws = b.make(DType::U8, 64 << 20);
  b.be.set_workspace(ws);
  AttnDims a;
  a.B = 1, a.S = static_cast<int>(T), a.heads = heads, a.kv_heads = heads, a.d = d;
  a.scale = 0.125f;
  RopeFrequencies freqs = rope_frequencies(RopeScaling{}, 10000.0f, d, 1, 1);
  const RopeTable rope{freqs.inv_freq.data(), d, 1.0f};
  const std::int64_t nq = T * 3 * C, np = static_cast<std::int64_t>(heads) * T * T, nc = T * C;
  struct Op {
    std::string name;
    std::function<void()> fn;
  };
  std::vector<Op> ops;
  for (DType dt : {DType::F32, DType::BF16}) {
    const std::string s = dt == DType::BF16 ? " bf16" : " fp32";
    Tensor x = b.make(dt, T * F), y = b.make(dt, T * F), dy = b.make(dt, T * F), dx = b.make(dt, T * F);
    Tensor gu = b.make(dt, T * 2 * F), dgu = b.make(dt, T * 2 * F);
    Tensor qkv = b.make(dt, nq), qkv2 = b.make(dt, nq), P = b.make(dt, np, 0.0f, 0.02f), dP = b.make(dt, np);
    Tensor ctx = b.make(dt, nc), lse = b.make(DType::F32, heads * T);
    const std::int64_t n = T * F;
    ops.push_back({"gelu tanh fwd+bwd [128x3072]" + s, [&b, x, y, dy, dx, n] {
                     b.be.gelu_fwd(x, y, n);
                     b.be.gelu_bwd(x, dy, dx, n, false);
                   }});
    ops.push_back({"gelu tanh fwd [128x3072]" + s, [&b, x, y, n] { b.be.gelu_fwd(x, y, n); }});
    ops.push_back({"gelu tanh bwd [128x3072]" + s, [&b, x, dy, dx, n] { b.be.gelu_bwd(x, dy, dx, n, false); }});
    ops.push_back({"gelu erf fwd+bwd [128x3072]" + s, [&b, x, y, dy, dx, n] {
                     b.be.run(OpKind::GeluErf, Pass::Forward, act(&x, &y, nullptr, nullptr, n, 1));
                     b.be.run(OpKind::GeluErf, Pass::Backward, act(&x, nullptr, &dy, &dx, n, 1));
                   }});
    ops.push_back({"swiglu fwd+bwd [128x2x3072]" + s, [&b, gu, y, dy, dgu, T, F] {
                     b.be.swiglu_fwd(gu, y, T, static_cast<int>(F));
                     b.be.swiglu_bwd(gu, dy, dgu, T, static_cast<int>(F), false);
                   }});
    ops.push_back({"geglu fwd+bwd [128x2x3072]" + s, [&b, gu, y, dy, dgu, T, F] {
                     b.be.run(OpKind::GeGlu, Pass::Forward, act(&gu, &y, nullptr, nullptr, T, static_cast<int>(F)));
                     b.be.run(OpKind::GeGlu, Pass::Backward, act(&gu, nullptr, &dy, &dgu, T, static_cast<int>(F)));
                   }});
    ops.push_back({"rope fwd+bwd [128x2304]" + s, [&b, qkv, qkv2, a, rope] {
                     b.be.rope_fwd(qkv, qkv2, a, rope);
                     b.be.rope_bwd(qkv2, qkv, a, rope, false);
                   }});
    ops.push_back({"attn softmax fwd (12x128x128)" + s, [&b, qkv, P, a] { b.be.attn_softmax_fwd(qkv, P, a); }});
    ops.push_back({"attn softmax bwd (12x128x128)" + s, [&b, qkv, P, dP, qkv2, a] {
                     b.be.attn_softmax_bwd(qkv, P, dP, qkv2, a);
                   }});
    ops.push_back({"attn pv fwd (12x128x128, d 64)" + s, [&b, qkv, P, ctx, a] {
                     b.be.attn_pv_fwd(P, qkv, ctx, a);
                   }});
    ops.push_back({"attn pv bwd (12x128x128, d 64)" + s, [&b, qkv, P, ctx, dP, qkv2, a] {
                     b.be.attn_pv_bwd(P, qkv, ctx, dP, qkv2, a, false);
                   }});
    ops.push_back({"flash fwd (12x128, d 64)" + s, [&b, qkv, ctx, lse, a] {
                     b.be.flash_fwd(qkv, ctx, lse, a, DropoutKey{}, 0.0f);
                   }});
    ops.push_back({"flash fwd+bwd (12x128, d 64), dropout 0.1" + s, [&b, qkv, ctx, lse, qkv2, a] {
                     b.be.flash_fwd(qkv, ctx, lse, a, DropoutKey{1, 1, 0, kSiteAttentionProbs}, 0.1f);
                     b.be.flash_bwd(qkv, ctx, lse, ctx, qkv2, a, DropoutKey{1, 1, 0, kSiteAttentionProbs}, 0.1f);
                   }});
  }
  Tensor mask = b.make(DType::U8, static_cast<std::int64_t>(heads) * T * T);
  ops.push_back({"dropout mask (12x128x128), p 0.1", [&b, mask, heads, T] {
                   b.be.dropout_mask(mask, DropoutKey{1, 1, 0, kSiteAttentionProbs}, 0.1f,
                                     static_cast<std::int64_t>(heads) * T * T);
                 }});
  // The head's cross-entropy over its chunk of 128 rows of logits, the rows split over the lanes
  // as the head splits them; in place, so each call's logits are the previous call's gradient.
  cpu::ThreadPool pool(threads);
  const int V = 50257;
  std::vector<float> logits(static_cast<std::size_t>(T) * V), losses(T);
  std::vector<std::int32_t> targets(T);
  {
    std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
    for (float& v : logits) v = dist(b.rng);
    for (std::int64_t r = 0; r < T; ++r) targets[r] = static_cast<std::int32_t>((r * 7919) % V);
  }
  for (float cap : {0.0f, 30.0f}) {
    const std::string s = cap > 0.0f ? " softcap 30" : "";
    ops.push_back({"head cross-entropy rows [128x50257]" + s + " fp32", [&, cap, V, T] {
                     cpu::parallel_for(pool, T, 4, [&](std::int64_t i0, std::int64_t i1, int) {
                       for (std::int64_t i = i0; i < i1; ++i)
                         losses[i] = cpu::cross_entropy_row(logits.data() + i * V, V, targets[i],
                                                            1.0f / T, cap);
                     });
                   }});
  }
  const std::vector<const cpu::simd::Kernels*> sets = cpu::simd::available();
  std::printf("%d threads, medians of %d calls\n| op | scalar ms | %s ms |", threads, reps, sets.front()->name);
  for (const auto* k : sets) std::printf(" %s ×faster |", k->name);
  std::printf("\n|---|---|---|");
  for (std::size_t i = 0; i < sets.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const Op& op : ops) {
    if (op.name.find(filter) == std::string::npos) continue;
    cpu::simd::set_active(nullptr);
    op.fn();
    const double ref = median_ms(reps, op.fn);
    std::vector<double> t;
    for (const auto* k : sets) {
      cpu::simd::set_active(k);
      op.fn();
      t.push_back(median_ms(reps, op.fn));
    }
    std::printf("| %s | %.3f | %.3f |", op.name.c_str(), ref, t.front());
    for (double v : t) std::printf(" %.2f |", ref / v);
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace remat

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 21;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  if (reps <= 0 || threads <= 0) {
    std::fprintf(stderr, "usage: cpu_ops_bench [reps > 0] [threads > 0] [filter]\n");
    return 2;
  }
  return remat::run(reps, threads, argc > 3 ? argv[3] : "");
}
